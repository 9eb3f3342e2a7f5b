/*
 * execer: a program that replaces itself and then loads a library.
 * Prints "ready", spins in before_exec for 300 ms and execs itself with the
 * argument "after"; the new program spins in after_exec for 300 ms, then
 * dlopen()s libm and spins calling its cos() for ever.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;
volatile double dsink;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void before_exec(double until)
{
	while (now() < until)
		for (int i = 0; i < 100000; i++)
			sink++;
}

__attribute__((noinline)) void after_exec(double until)
{
	while (now() < until)
		for (int i = 0; i < 100000; i++)
			sink++;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "after") != 0) {
		printf("ready\n");
		fflush(stdout);
		before_exec(now() + 0.3);
		execl("/proc/self/exe", argv[0], "after", (char *)NULL);
		perror("exec");
		return 1;
	}
	after_exec(now() + 0.3);
	void *m = dlopen("libm.so.6", RTLD_NOW);
	if (!m) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	double (*cosp)(double) = (double (*)(double))dlsym(m, "cos");
	for (double x = 0;; x += 0.001)
		dsink = cosp(x);
}
