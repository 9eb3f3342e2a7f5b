/*
 * exiter: targets whose threads, or the whole process, go away while a
 * sampler is attached.
 *
 *   exiter exit MS     4 spinning threads (comm "ex-spin": ex_spin_leaf,
 *                      ex_spin_thread); "ready" once they spin; the process
 *                      calls exit(0) MS milliseconds later.
 *   exiter churn [MS]  WORKERS (4) creator threads ("ex-creator") each create
 *                      and join short-lived threads ("ex-churn": churn_leaf,
 *                      churn_mid, churn_thread) back to back, so threads
 *                      appear and disappear at a high rate; "ready" after
 *                      the first 100 have ended; exits after MS ms if MS > 0.
 *                      The progress counter is the number of ended threads.
 *
 * Progress is published every 10 ms (see target.h); in "exit" mode it
 * counts 10 ms ticks.
 */
#include "target.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#define WORKERS 4
#define STACK_SIZE (64 * 1024)

static volatile unsigned long spin_counts[WORKERS];
static atomic_ullong churned;
volatile int sink;

TARGET_FN void ex_spin_leaf(volatile unsigned long *n)
{
	for (;;)
		spin_step(n, 0);
}

static void *ex_spin_thread(void *arg)
{
	prctl(PR_SET_NAME, "ex-spin");
	ex_spin_leaf(&spin_counts[(long)arg]);
	sink++;
	return NULL;
}

/* churn_leaf spins briefly (a few microseconds), then returns: the thread
 * ends while a sampler may be walking its stack. */
TARGET_FN int churn_leaf(int rounds)
{
	volatile unsigned long n = 0;
	for (int i = 0; i < rounds; i++)
		n++;
	return (int)n;
}

TARGET_FN int churn_mid(int rounds)
{
	int r = churn_leaf(rounds);
	sink += r;
	return r;
}

static void *churn_thread(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "ex-churn");
	sink += churn_mid(2000);
	return NULL;
}

static void *creator_thread(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "ex-creator");
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	for (;;) {
		pthread_t th;
		int err = pthread_create(&th, &attr, churn_thread, NULL);
		if (err == EAGAIN) {
			progress_sleep_ms(1);
			continue;
		}
		if (err != 0)
			die("pthread_create", err);
		pthread_join(th, NULL);
		atomic_fetch_add(&churned, 1);
	}
	return NULL;
}

static void start_threads(void *(*fn)(void *))
{
	for (long i = 0; i < WORKERS; i++) {
		pthread_t th;
		int err = pthread_create(&th, NULL, fn, (void *)i);
		if (err != 0)
			die("pthread_create", err);
		pthread_detach(th);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: exiter exit MS | exiter churn [MS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	long ms = argc > 2 ? atol(argv[2]) : 0;
	int churn = strcmp(argv[1], "churn") == 0;
	if (!churn && (strcmp(argv[1], "exit") != 0 || argc < 3 || ms < 0))
		usage();

	if (churn) {
		start_threads(creator_thread);
		while (atomic_load(&churned) < 100)
			progress_sleep_ms(1);
	} else {
		start_threads(ex_spin_thread);
		for (int i = 0; i < WORKERS; i++)
			while (spin_counts[i] == 0)
				progress_sleep_ms(1);
	}
	progress_write(0); /* readable as soon as "ready" is seen */
	announce_ready();

	for (unsigned long long tick = 1;; tick++) {
		progress_write(churn ? atomic_load(&churned) : tick);
		if (ms > 0 && (long long)tick * 10 >= ms)
			exit(0);
		progress_sleep_ms(10);
	}
}
