/*
 * tailcall: threads whose stacks lose functions to tail calls, for the
 * tail-call frames stacktop rebuilds from DWARF call sites as gdb does.
 * Built -O2 -g by stackdump/tailcall_live_test.go (with frame pointers,
 * and with SFrame) against libtailcall.so (tailcall_lib.c), not by
 * scripts/build-targets.sh; other tests link tailcall_lib.c into the
 * program (then lib_wait is no PLT call).
 *
 *   spin      spin_here <- jump1 (tail call) <- jump2 (tail call) <- spin_caller <- spin_thread
 *   pause     pause (libc) <- wait_pause (tail call) <- pause_thread
 *   condwait  pthread_cond_wait (libc: a tail call inside with libc6-dbg) <- cond_thread
 *   libwait   pause (libc) <- lib_block <- lib_wait (tail call, in
 *             libtailcall.so: tailcall_lib.c) <- lib_thread: a call through
 *             the PLT whose tail call is in the other object's call sites
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile int sink, stop;

/* Returns (as far as the compiler knows), so its callers may jump to it. */
NOINLINE void spin_here(int n)
{
	while (!stop)
		sink += n;
}

/* Both end in a jump at -O2: their frames are on no stack. */
NOINLINE void jump1(int n) { spin_here(n + 1); }
NOINLINE void jump2(int n) { jump1(n * 3); }

NOINLINE void spin_caller(int n)
{
	jump2(n + 2);
	sink++; /* a real call above, not a jump */
}

static void *spin_thread(void *arg)
{
	spin_caller((int)(long)arg);
	return NULL;
}

/* The one-line wrapper: jmp pause. */
NOINLINE void wait_pause(void) { pause(); }

static void *pause_thread(void *arg)
{
	(void)arg;
	wait_pause();
	sink++;
	return NULL;
}

void lib_wait(void); /* tailcall_lib.c */

static void *lib_thread(void *arg)
{
	(void)arg;
	lib_wait();
	sink++; /* a real call above, through the PLT */
	return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *cond_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&never, &mu);
	return NULL;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, spin_thread, (void *)1L) ||
	    pthread_create(&t, NULL, pause_thread, NULL) ||
	    pthread_create(&t, NULL, lib_thread, NULL))
		return 1;
	pthread_setname_np(t, "libwait");
	if (pthread_create(&t, NULL, cond_thread, NULL))
		return 1;
	pthread_setname_np(t, "condwait");
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
