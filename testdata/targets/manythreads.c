/*
 * manythreads [N [SPINNERS]]: N threads (default 1000) on 64 KiB stacks, so
 * a sampler's per-thread costs (attach, stop, register and stack reads) can
 * be measured at scale.
 *
 *   comm       innermost frame first (then start_thread, clone3 in libc)
 *   mt-spin    mt_spin_leaf, mt_spin_mid, mt_spin_thread   (SPINNERS of
 *              them, default 4; nap 1 ms every 16384 iterations)
 *   mt-cond    libc's futex wait, pthread_cond_wait, mt_cond_block,
 *              mt_blocked_thread                            (even indices)
 *   mt-sleep   libc's clock_nanosleep, nanosleep, mt_sleep_block,
 *              mt_blocked_thread                            (odd indices)
 *
 * Prints "ready" once all N threads have started and every spinner has
 * counted; cond waiters announce themselves under the mutex they wait with,
 * so by then they are inside pthread_cond_wait. Then publishes progress
 * every 10 ms (see target.h).
 */
#include "target.h"

#include <pthread.h>
#include <sys/prctl.h>

#define STACK_SIZE (64 * 1024)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int started; /* under mu */
static volatile unsigned long *spin_counts;
volatile int sink;

TARGET_FN void mt_spin_leaf(volatile unsigned long *n)
{
	for (;;)
		spin_step(n, 0);
}

TARGET_FN void mt_spin_mid(volatile unsigned long *n)
{
	mt_spin_leaf(n);
	sink++;
}

static void announce_started(void)
{
	pthread_mutex_lock(&mu);
	started++;
	pthread_mutex_unlock(&mu);
}

static void *mt_spin_thread(void *arg)
{
	prctl(PR_SET_NAME, "mt-spin");
	announce_started();
	mt_spin_mid(&spin_counts[(long)arg]);
	sink++;
	return NULL;
}

TARGET_FN void mt_cond_block(void)
{
	pthread_mutex_lock(&mu);
	started++;
	for (;;) /* nobody signals */
		pthread_cond_wait(&never, &mu);
}

TARGET_FN void mt_sleep_block(void)
{
	for (;;) {
		struct timespec ts = {3600, 0};
		nanosleep(&ts, NULL);
	}
}

static void *mt_blocked_thread(void *arg)
{
	if ((long)arg % 2 == 0) {
		prctl(PR_SET_NAME, "mt-cond");
		mt_cond_block();
	} else {
		prctl(PR_SET_NAME, "mt-sleep");
		announce_started();
		mt_sleep_block();
	}
	sink++;
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long spinners = argc > 2 ? atol(argv[2]) : 4;
	if (n < 0 || spinners < 0 || spinners > n) {
		fprintf(stderr, "usage: manythreads [N [SPINNERS<=N]]\n");
		return 2;
	}
	spin_counts = calloc((size_t)spinners + 1, sizeof *spin_counts);
	if (spin_counts == NULL)
		die("calloc", ENOMEM);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (long i = 0; i < n; i++) {
		pthread_t th;
		void *(*fn)(void *) = i < spinners ? mt_spin_thread : mt_blocked_thread;
		int err = pthread_create(&th, &attr, fn, (void *)i);
		if (err != 0)
			die("pthread_create", err);
	}

	for (int tries = 0;; tries++) {
		pthread_mutex_lock(&mu);
		int all = started == n;
		pthread_mutex_unlock(&mu);
		for (long i = 0; i < spinners && all; i++)
			all = spin_counts[i] != 0;
		if (all)
			break;
		if (tries > 30000) /* 30 s */
			die("threads did not start", ETIMEDOUT);
		progress_sleep_ms(1);
	}
	ready_then_tick();
}
