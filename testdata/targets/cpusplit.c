/*
 * cpusplit: threads that use very different shares of a CPU, for the
 * on-CPU profile (a sample must count the CPU time a thread used, at the
 * stack where it used it: not the fact that it woke up, and not the stack
 * it sleeps in at the tick).
 *
 *   "hot"      cpu_hot_spin <- cpu_hot_thread            100% of a CPU
 *   "quarter"  cpu_quarter_spin <- cpu_quarter_thread    spins 5 ms of its
 *              own CPU time, then sleeps 15 ms: 25% of a CPU when it gets one
 *   "fifth"    cpu_fifth_spin <- cpu_fifth_thread        spins 1 ms, then
 *              sleeps 19 ms: 5%
 *   "waker"    nanosleep <- cpu_waker_thread             wakes every 500 us
 *              and does nothing else (~0% CPU, 2,000 wake-ups a second)
 *
 * The busy phases are shorter than or about one sampling period (10 ms at
 * 99 Hz), so at most ticks quarter and fifth are asleep: a profiler that
 * charges what a thread ran to the stack the tick finds puts their CPU in
 * nanosleep. The main thread sleeps in nanosleep and writes the progress
 * file.
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

/* spin_for burns ns of the thread's own CPU time. It reads the clock (a
 * system call: the vDSO does not serve thread CPU clocks) every 65536
 * iterations, some 50-100 us, as split does, so that samples land in the
 * loop, not in clock_gettime. */
static void spin_for(long long ns)
{
	long long end = thread_cpu_ns() + ns;
	while (thread_cpu_ns() < end) {
		for (unsigned i = 0; i < 65536; i++)
			sink += i;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000};
	nanosleep(&ts, NULL);
}

TARGET_FN void cpu_quarter_spin(void) { spin_for(5000000); }

TARGET_FN void *cpu_quarter_thread(void *arg)
{
	(void)arg;
	for (;;) {
		cpu_quarter_spin();
		sleep_ms(15);
	}
	return NULL;
}

TARGET_FN void cpu_fifth_spin(void) { spin_for(1000000); }

TARGET_FN void *cpu_fifth_thread(void *arg)
{
	(void)arg;
	for (;;) {
		cpu_fifth_spin();
		sleep_ms(19);
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
		{"fifth", cpu_fifth_thread},
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
