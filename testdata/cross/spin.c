/*
 * spin: the cross-architecture fixture (s390x, aarch64, x86-64). Threads
 * spin forever in known call chains of this binary's own code, so the
 * expected stack of each is known by construction:
 *
 *   comm     innermost frame first (then start_thread and clone in libc)
 *   deep     spin_nonleaf, level1, level2, level3, deep_thread
 *   leaf     spin_leaf, leaf_caller, leaf_thread
 *   big      spin_bigleaf, big_caller, big_thread
 *   main     the main thread, in libc's pause (not checked)
 *
 * spin_nonleaf calls a function once before its loop, so it is not a leaf:
 * it saves r14 (s390x) or x30 (aarch64) in its prologue. spin_leaf calls
 * nothing: its return address stays in r14/x30 (SFrame: RA in a register in
 * the topmost frame). Both keep a stack buffer, so they allocate a frame
 * and, built with -mbackchain, store a back chain. spin_bigleaf is a leaf
 * too, with 40 KiB of locals: more than the 16 KiB of stack a sampler copies
 * while the thread is stopped, so its caller's frame is only in the live
 * stack.
 *
 * Spinners nap 1 ms every few thousand iterations with a raw nanosleep
 * issued by inline asm from the innermost function itself, so no libc frame
 * is ever on top. Prints "ready" when every thread runs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile int started;
/* Never set: the loops end on it so GCC cannot infer that the spinners
 * never return (callers of a noreturn function need not save their
 * return address, which would break every unwinder's view of them). */
static volatile int stop;

static inline void nap(void)
{
	struct timespec ts = {0, 1000000};
#if defined(__s390x__)
	register long r2 __asm__("r2") = (long)&ts;
	register long r3 __asm__("r3") = 0;
	__asm__ volatile("svc 162" : "+d"(r2) : "d"(r3) : "memory", "cc");
#elif defined(__aarch64__)
	register long x0 __asm__("x0") = (long)&ts;
	register long x1 __asm__("x1") = 0;
	register long x8 __asm__("x8") = 101;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x1), "r"(x8) : "memory", "cc");
#elif defined(__x86_64__)
	long ret = 35;
	__asm__ volatile("syscall" : "+a"(ret) : "D"(&ts), "S"(0) : "rcx", "r11", "memory", "cc");
#else
#error "unsupported architecture"
#endif
}

NOINLINE void touch(volatile char *buf)
{
	buf[0] = 1;
	__sync_fetch_and_add(&started, 1);
}

NOINLINE void spin_nonleaf(int n)
{
	volatile char buf[64];
	touch(buf);
	for (unsigned long i = 0; !stop; i++) {
		buf[i % sizeof buf] += (char)n;
		if (i % 4096 == 0)
			nap();
	}
}

NOINLINE void level1(int n) { spin_nonleaf(n + 1); __asm__ volatile("" ::: "memory"); }
NOINLINE void level2(int n) { level1(n + 1); __asm__ volatile("" ::: "memory"); }
NOINLINE void level3(int n) { level2(n + 1); __asm__ volatile("" ::: "memory"); }

NOINLINE void *deep_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "deep");
	level3((int)(long)arg);
	return NULL;
}

NOINLINE void spin_leaf(int n)
{
	volatile char buf[64];
	buf[0] = 0;
	for (unsigned long i = 0; !stop; i++) {
		buf[i % sizeof buf] += (char)n;
		if (i % 4096 == 0)
			nap();
	}
}

NOINLINE void leaf_caller(int n)
{
	__sync_fetch_and_add(&started, 1);
	spin_leaf(n + 1);
	__asm__ volatile("" ::: "memory");
}

NOINLINE void *leaf_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "leaf");
	leaf_caller((int)(long)arg);
	return NULL;
}

NOINLINE void spin_bigleaf(int n)
{
	volatile char buf[40 << 10];
	buf[0] = 0;
	for (unsigned long i = 0; !stop; i++) {
		buf[(i * 4099) % sizeof buf] += (char)n;
		if (i % 4096 == 0)
			nap();
	}
}

NOINLINE void big_caller(int n)
{
	__sync_fetch_and_add(&started, 1);
	spin_bigleaf(n + 1);
	__asm__ volatile("" ::: "memory");
}

NOINLINE void *big_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "big");
	big_caller((int)(long)arg);
	return NULL;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, deep_thread, (void *)1L) || pthread_create(&t, NULL, leaf_thread, (void *)2L) ||
	    pthread_create(&t, NULL, big_thread, (void *)3L)) {
		perror("pthread_create");
		return 1;
	}
	while (started < 3)
		usleep(1000);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (!stop)
		pause();
	return 0;
}
