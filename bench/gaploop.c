/*
 * gaploop SECONDS: a CPU-bound single thread that measures the time it
 * lost. It reads CLOCK_MONOTONIC in a tight loop (a vDSO call, well under
 * a microsecond); a gap of more than 3 µs between two readings is time
 * the thread did not run: a ptrace stop, a preemption, an interrupt.
 * Prints the share of wall time lost, the number of gaps and their mean,
 * then the same for gaps shorter than 1 ms alone:
 *   "gaploop lost 4.21% gaps 4012 mean 52.3 us; short lost 3.10% gaps 4005"
 * On a VM the long gaps are mostly the host running something else on
 * this vCPU, noise that hides a sampler's cost; a ptrace sample's gap is
 * tens to hundreds of microseconds.
 * Unlike cpuloop's throughput, the figure does not move with the CPU's
 * speed, so a sampler's cost per sample shows through a noisy VM.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	double start = now_us(), end = start + secs * 1e6, prev = start, t, lost = 0, short_lost = 0;
	long gaps = 0, short_gaps = 0;
	while ((t = now_us()) < end) {
		double d = t - prev;
		if (d > 3) {
			lost += d;
			gaps++;
			if (d < 1000) {
				short_lost += d;
				short_gaps++;
			}
		}
		prev = t;
	}
	printf("gaploop lost %.3f%% gaps %ld mean %.1f us; short lost %.3f%% gaps %ld\n",
	       100 * lost / (t - start), gaps, gaps ? lost / gaps : 0, 100 * short_lost / (t - start),
	       short_gaps);
	return 0;
}
