/*
 * cpuloop SECONDS: a CPU-bound single thread that reports its own speed.
 * Spins for SECONDS of wall time in a loop of fixed work and prints the
 * iterations per second (millions) on stdout:  "cpuloop 123.45 Mit/s".
 * A sampler's slowdown is the drop of that figure against unsampled runs.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void work(void)
{
	for (int i = 0; i < 1000; i++)
		sink += i;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	double start = now(), end = start + secs, t;
	unsigned long iters = 0;
	do {
		for (int i = 0; i < 1000; i++)
			work();
		iters += 1000;
	} while ((t = now()) < end);
	printf("cpuloop %.2f Mit/s\n", iters / (t - start) / 1e6);
	return 0;
}
