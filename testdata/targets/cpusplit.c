/*
 * cpusplit: three threads that use very different shares of a CPU, for the
 * on-CPU profile's weighting (a sample must count the CPU time a thread
 * used, not the fact that it woke up).
 *
 *   "hot"      cpu_hot_spin <- cpu_hot_thread            100% of a CPU
 *   "quarter"  cpu_quarter_spin <- cpu_quarter_thread    spins 1 ms of its
 *              own CPU time, then sleeps 3 ms: 25% of a CPU when it gets one
 *   "waker"    nanosleep <- cpu_waker_thread             wakes every 500 us
 *              and does nothing else (~0% CPU, 2,000 wake-ups a second)
 *
 * The main thread sleeps in nanosleep and writes the progress file.
 */
#include "target.h"

#include <pthread.h>

static volatile unsigned long long sink;

static long long thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

TARGET_FN void cpu_hot_spin(void)
{
	for (unsigned i = 0; i < 100000; i++)
		sink += i;
}

TARGET_FN void *cpu_hot_thread(void *arg)
{
	(void)arg;
	for (;;)
		cpu_hot_spin();
	return NULL;
}

/* cpu_quarter_spin burns ns of the thread's own CPU time. */
TARGET_FN void cpu_quarter_spin(long long ns)
{
	long long end = thread_cpu_ns() + ns;
	while (thread_cpu_ns() < end) {
		for (unsigned i = 0; i < 1000; i++)
			sink += i;
	}
}

TARGET_FN void *cpu_quarter_thread(void *arg)
{
	(void)arg;
	for (;;) {
		cpu_quarter_spin(1000000);
		struct timespec ts = {0, 3000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

TARGET_FN void *cpu_waker_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(void)
{
	static const struct {
		const char *name;
		void *(*fn)(void *);
	} threads[] = {
		{"hot", cpu_hot_thread},
		{"quarter", cpu_quarter_thread},
		{"waker", cpu_waker_thread},
	};
	for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, threads[i].fn, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
		pthread_setname_np(th, threads[i].name);
	}
	announce_ready();
	for (unsigned long long n = 1;; n++) {
		progress_write(n);
		progress_sleep_ms(10);
	}
}
