/*
 * split [SECONDS]: one thread whose CPU time is split by construction:
 * 75% in a() -> hot() and 25% in b() -> cold().
 *
 * The thread alternates slices of its own CPU time (CLOCK_THREAD_CPUTIME_ID,
 * so time spent stopped by a sampler or descheduled does not count): 3 ms
 * in hot, then 1 ms in cold. A profiler sampling the thread at any rate
 * that does not divide 250 Hz must attribute 75% +- noise of the on-CPU
 * samples to the chain main -> a -> hot and 25% to main -> b -> cold.
 *
 * Prints "ready" before the first slice; publishes the number of completed
 * 4 ms rounds as progress every 10 rounds (see target.h). With SECONDS it
 * exits with status 0 after that much CPU time.
 */
#include "target.h"

#define HOT_NS 3000000LL
#define COLD_NS 1000000LL

volatile unsigned long sink;

static long long thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* spin_until burns CPU until the thread's CPU clock reaches end. The clock
 * is read every 65536 iterations (some 50 us) so that samples land in the loop
 * itself, not in clock_gettime. Always inlined: the PC stays in hot or
 * cold. */
static inline __attribute__((always_inline)) void spin_until(long long end)
{
	for (;;) {
		for (int i = 0; i < 65536; i++)
			sink++;
		if (thread_ns() >= end)
			return;
	}
}

TARGET_FN void hot(long long end) { spin_until(end); }
TARGET_FN void cold(long long end) { spin_until(end); }
TARGET_FN void a(long long end) { hot(end); sink++; }
TARGET_FN void b(long long end) { cold(end); sink++; }

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 0;
	long long stop = seconds > 0 ? thread_ns() + (long long)(seconds * 1e9) : 0;
	progress_write(0);
	announce_ready();
	for (unsigned long long round = 1;; round++) {
		long long t = thread_ns();
		a(t + HOT_NS);
		b(thread_ns() + COLD_NS);
		if (round % 10 == 0)
			progress_write(round);
		if (stop && thread_ns() >= stop)
			return 0;
	}
}
