/*
 * cpuloop SECONDS: a CPU-bound single thread that reports its own speed.
 * Spins for SECONDS of wall time in a loop of fixed work and prints the
 * iterations per second (millions) on stdout, per second of wall time and
 * per second of its own CPU time:  "cpuloop 123.45 Mit/s 130.10 Mit/cpus".
 * A sampler's slowdown is the drop of the first figure against unsampled
 * runs. The second is blind to time spent stopped (ptrace) but not to the
 * kernel's work in the thread's interrupts (perf_event), and holds on a
 * loaded machine, where the wall-time figure mostly measures the load.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

static double clock_s(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

__attribute__((noinline)) static void work(void)
{
	for (int i = 0; i < 1000; i++)
		sink += i;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	double start = now(), end = start + secs, t;
	double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	unsigned long iters = 0;
	do {
		for (int i = 0; i < 1000; i++)
			work();
		iters += 1000;
	} while ((t = now()) < end);
	double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	printf("cpuloop %.2f Mit/s %.2f Mit/cpus\n", iters / (t - start) / 1e6, iters / cpu / 1e6);
	return 0;
}
