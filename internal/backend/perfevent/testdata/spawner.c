/*
 * spawner: threads created after a sampler has started.
 * Prints "ready", then in rounds: creates 3 threads ("sp-late") that spin
 * in late_spin for 150 ms of wall time and exit, and joins them; the main
 * thread sleeps meanwhile. Every sampled late thread is one the sampler
 * did not see at start, and every one of them exits while sampled.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void late_spin(double until)
{
	while (now() < until)
		for (int i = 0; i < 100000; i++)
			sink++;
}

static void *late_thread(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "sp-late");
	late_spin(now() + 0.15);
	return NULL;
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	usleep(200000);
	for (;;) {
		pthread_t t[3];
		for (int i = 0; i < 3; i++)
			pthread_create(&t[i], NULL, late_thread, NULL);
		for (int i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
		usleep(20000);
	}
}
