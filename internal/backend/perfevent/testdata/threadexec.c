/*
 * threadexec: execve from a thread that is not the main one.
 * Prints "ready", starts a thread that spins in before_exec for 200 ms and
 * execs the program with the argument "after" (the kernel gives that
 * thread the process's PID and ends the main thread); the new program
 * spins in after_exec for ever on its only thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

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

__attribute__((noinline)) void after_exec(void)
{
	for (;;)
		sink++;
}

static char *self;

static void *exec_thread(void *arg)
{
	(void)arg;
	before_exec(now() + 0.2);
	execl("/proc/self/exe", self, "after", (char *)NULL);
	perror("exec");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "after") == 0)
		after_exec();
	self = argv[0];
	printf("ready\n");
	fflush(stdout);
	pthread_t t;
	pthread_create(&t, NULL, exec_thread, NULL);
	for (;;)
		pause();
}
