/*
 * mixthreads N SPINNERS: a process of N threads besides the main one, of
 * mixed kinds, for the dump and pressure benchmarks:
 *   the first SPINNERS spin without pause (mix_spin),
 *   the rest block, in turn: in libc's pthread_cond_wait (mix_cond), in
 *   libc's nanosleep (mix_sleep), in a raw read(2) on a pipe (mix_read)
 *   and in a raw futex wait (mix_futex).
 * Prints "ready" once every thread started, then sleeps.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int pipefd[2];
static volatile int futex_word, started;
volatile unsigned long sink;

__attribute__((noinline)) void mix_spin(void)
{
	for (;;)
		sink++;
}

__attribute__((noinline)) void mix_cond(void)
{
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&never, &mu);
}

__attribute__((noinline)) void mix_sleep(void)
{
	for (;;) {
		struct timespec ts = {3600, 0};
		nanosleep(&ts, NULL);
	}
}

__attribute__((noinline)) void mix_read(void)
{
	char c;
	for (;;)
		syscall(SYS_read, pipefd[0], &c, 1);
}

__attribute__((noinline)) void mix_futex(void)
{
	for (;;)
		syscall(SYS_futex, &futex_word, 0 /* FUTEX_WAIT */, 0, NULL, NULL, 0);
}

static void *thread_main(void *arg)
{
	long kind = (long)arg;
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	switch (kind) {
	case -1: mix_spin(); break;
	case 0: mix_cond(); break;
	case 1: mix_sleep(); break;
	case 2: mix_read(); break;
	default: mix_futex(); break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long spinners = argc > 2 ? atol(argv[2]) : 4;
	if (pipe(pipefd) != 0)
		return 1;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (long i = 0; i < n; i++) {
		pthread_t th;
		long kind = i < spinners ? -1 : (i - spinners) % 4;
		if (pthread_create(&th, &attr, thread_main, (void *)kind) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	while (started < n)
		usleep(1000);
	usleep(50000);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
