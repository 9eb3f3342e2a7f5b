/*
 * busy [N]: N threads (default 16) spinning in busy_spin without pause,
 * for the back end's loss and overhead benchmark. Prints "ready" once all
 * run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void busy_spin(void)
{
	for (;;)
		sink++;
}

static void *busy_thread(void *arg)
{
	(void)arg;
	busy_spin();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 16;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		pthread_create(&t, NULL, busy_thread, NULL);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
