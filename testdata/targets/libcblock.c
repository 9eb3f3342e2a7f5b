/*
 * libcblock: threads parked inside the C library and the dynamic linker,
 * where stacks cross code stacktop did not build: libc's own functions
 * (.eh_frame CFI, no SFrame, no frame pointers), the vDSO and lazy
 * binding in ld.so. Each thread names itself after its case:
 *
 *   comm       innermost frame first
 *   pause      pause (libc), pause_wait, pause_thread
 *   nanosleep  clock_nanosleep, nanosleep (libc), nanosleep_wait,
 *              nanosleep_thread
 *   readpipe   read (libc), read_wait, readpipe_thread  (a pipe nobody
 *                                                         writes to)
 *   condwait   futex wait inside pthread_cond_wait (libc), cond_wait,
 *              condwait_thread
 *   join       futex wait inside pthread_join (libc), join_wait,
 *              join_thread  (joins the pause thread, which never ends)
 *   poll       poll (libc), poll_wait, poll_thread
 *   vdso       the vDSO's clock_gettime, libc's clock_gettime, vdso_loop,
 *              vdso_thread  (a tight loop: the pc is anywhere in it)
 *   pltloop    rand_r (libc) or its PLT entry, plt_loop, pltloop_thread
 *              (a tight loop calling libc through the PLT)
 *   lazybind   lazy_resolver (libcblock-lazy.so, blocked in a raw
 *              read(2)), _dl_fixup, _dl_runtime_resolve_xsave(c) (ld.so),
 *              lazy_call, lazybind_thread: the first call of lazy_fn,
 *              an IFUNC of libcblock-lazy.so, bound lazily (-z lazy): its
 *              resolver runs inside the dynamic linker's lazy binding
 *              and blocks there until the test writes a byte to
 *              LAZY_FD (never, in the tests)
 *   main       the main thread, in libc's clock_nanosleep
 *
 * Below each thread function: start_thread and clone3 in libc.
 * Prints "ready" once every thread is in place (the lazybind thread inside
 * its resolver), then publishes a progress counter every 10 ms.
 */
#include "target.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>

enum slot {
	SLOT_PAUSE,
	SLOT_NANOSLEEP,
	SLOT_READ,
	SLOT_COND,
	SLOT_JOIN,
	SLOT_POLL,
	SLOT_VDSO,
	SLOT_PLT,
	SLOT_LAZY,
	NSLOTS
};

/* Defined in libcblock-lazy.c. */
extern volatile int lazy_resolving;
extern int lazy_fd;
int lazy_fn(int);

struct counter {
	volatile unsigned long n;
} __attribute__((aligned(64)));

static struct counter loops[NSLOTS];
static volatile int started[NSLOTS];
static int pipefd[2];
static pthread_t pause_tid;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
volatile long sink;

static void name(const char *comm, enum slot s)
{
	pthread_setname_np(pthread_self(), comm);
	started[s] = 1;
}

TARGET_FN void pause_wait(void)
{
	pause();
	sink++; /* no tail call: pause_wait keeps its frame */
}
TARGET_FN void *pause_thread(void *arg)
{
	name("pause", SLOT_PAUSE);
	for (;;)
		pause_wait();
	return arg;
}

TARGET_FN void nanosleep_wait(void)
{
	struct timespec ts = {1000000, 0};
	nanosleep(&ts, NULL);
}
TARGET_FN void *nanosleep_thread(void *arg)
{
	name("nanosleep", SLOT_NANOSLEEP);
	for (;;)
		nanosleep_wait();
	return arg;
}

TARGET_FN void read_wait(void)
{
	char c;
	sink += read(pipefd[0], &c, 1);
}
TARGET_FN void *readpipe_thread(void *arg)
{
	name("readpipe", SLOT_READ);
	for (;;)
		read_wait();
	return arg;
}

TARGET_FN void cond_wait(void)
{
	pthread_mutex_lock(&mu);
	pthread_cond_wait(&never, &mu);
	pthread_mutex_unlock(&mu);
}
TARGET_FN void *condwait_thread(void *arg)
{
	name("condwait", SLOT_COND);
	for (;;)
		cond_wait();
	return arg;
}

TARGET_FN void join_wait(void)
{
	pthread_join(pause_tid, NULL);
	sink++;
}
TARGET_FN void *join_thread(void *arg)
{
	name("join", SLOT_JOIN);
	for (;;)
		join_wait();
	return arg;
}

TARGET_FN void poll_wait(void)
{
	struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
	sink += poll(&p, 1, -1);
}
TARGET_FN void *poll_thread(void *arg)
{
	name("poll", SLOT_POLL);
	for (;;)
		poll_wait();
	return arg;
}

/* vdso_loop reads the clock as fast as it can: clock_gettime of
 * CLOCK_MONOTONIC never enters the kernel, so the pc is in the vDSO, in
 * libc's wrapper or here. */
TARGET_FN void vdso_loop(void)
{
	struct timespec ts;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += ts.tv_nsec;
		loops[SLOT_VDSO].n++;
	}
}
TARGET_FN void *vdso_thread(void *arg)
{
	name("vdso", SLOT_VDSO);
	vdso_loop();
	return arg;
}

/* plt_loop calls libc through the PLT (rand_r is neither a builtin nor a
 * system call), so the pc may be in the PLT stub itself. */
TARGET_FN void plt_loop(void)
{
	unsigned seed = 1;
	for (;;) {
		sink += rand_r(&seed);
		loops[SLOT_PLT].n++;
	}
}
TARGET_FN void *pltloop_thread(void *arg)
{
	name("pltloop", SLOT_PLT);
	plt_loop();
	return arg;
}

/* lazy_call makes the first call of lazy_fn: with -z lazy its GOT slot
 * still points back into the PLT, so the call enters
 * _dl_runtime_resolve, whose _dl_fixup runs lazy_fn's IFUNC resolver. */
TARGET_FN void lazy_call(void) { sink += lazy_fn(1); }
TARGET_FN void *lazybind_thread(void *arg)
{
	name("lazybind", SLOT_LAZY);
	for (;;)
		lazy_call();
	return arg;
}

int main(void)
{
	static void *(*const fns[NSLOTS])(void *) = {
		pause_thread, nanosleep_thread, readpipe_thread,
		condwait_thread, join_thread, poll_thread,
		vdso_thread, pltloop_thread, lazybind_thread,
	};
	int lazy_pipe[2];
	if (pipe(pipefd) != 0 || pipe(lazy_pipe) != 0)
		die("pipe", errno);
	lazy_fd = lazy_pipe[0];
	for (int s = 0; s < NSLOTS; s++) {
		pthread_t t;
		int err = pthread_create(&t, NULL, fns[s], NULL);
		if (err != 0)
			die("pthread_create", err);
		if (s == SLOT_PAUSE)
			pause_tid = t;
		/* join needs pause_tid: start the threads one by one. */
		while (!started[s])
			progress_sleep_ms(1);
	}
	/* Blocked threads: give each time to reach its system call. The
	 * loops must have turned, and the resolver must be blocking. */
	while (loops[SLOT_VDSO].n == 0 || loops[SLOT_PLT].n == 0 || !lazy_resolving)
		progress_sleep_ms(1);
	progress_sleep_ms(50);
	progress_write(0);
	announce_ready();
	for (unsigned long long i = 1;; i++) {
		progress_sleep_ms(10);
		progress_write(i);
	}
}
