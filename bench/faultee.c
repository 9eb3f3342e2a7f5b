/*
 * faultee: the target of bench/fault-matrix.sh.
 *
 *   faultee spin N FILE    N spinning threads; every 20 ms the main thread
 *                          writes "progress P rt R" to FILE: P grows while
 *                          the spinners run, R counts SIGRTMIN deliveries
 *                          (real-time signals queue: none may be lost).
 *   faultee exec N FILE    as spin, and after 1 s the process execs itself
 *                          in spin mode (same PID, new image).
 *   faultee dstate N FILE  as spin, and one more thread that vforks over
 *                          and over; the child sleeps 300 ms, so that
 *                          thread spends most of its time in state D.
 *   faultee send PID N     sigqueue()s N SIGRTMIN to PID, retrying while
 *                          the queue is full; prints the seconds it took.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong progress, rt_count;
static const char *out;

static void on_rt(int sig) { (void)sig; atomic_fetch_add(&rt_count, 1); }

static void *spin(void *arg) {
	(void)arg;
	for (;;) {
		for (volatile int i = 0; i < 100000; i++) {}
		atomic_fetch_add(&progress, 1);
	}
	return NULL;
}

static void *vforker(void *arg) {
	(void)arg;
	for (;;) {
		pid_t pid = vfork();
		if (pid == 0) {
			usleep(300000);
			_exit(0);
		}
		usleep(10000);
	}
	return NULL;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	if (argc == 4 && strcmp(argv[1], "send") == 0) {
		pid_t pid = atoi(argv[2]);
		long n = atol(argv[3]);
		double t0 = now();
		union sigval v = {0};
		for (long i = 0; i < n;) {
			if (sigqueue(pid, SIGRTMIN, v) == 0)
				i++;
			else if (errno == EAGAIN)
				usleep(100);
			else {
				perror("sigqueue");
				return 1;
			}
		}
		printf("%.3f\n", now() - t0);
		return 0;
	}
	if (argc != 4)
		return 2;
	int n = atoi(argv[2]);
	out = argv[3];
	/* A background job of a non-interactive shell starts with SIGINT
	 * ignored: give it back its default action (terminate). */
	signal(SIGINT, SIG_DFL);
	struct sigaction sa = {0};
	sa.sa_handler = on_rt;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN, &sa, NULL);
	pthread_t t;
	for (int i = 0; i < n; i++)
		pthread_create(&t, NULL, spin, NULL);
	if (strcmp(argv[1], "dstate") == 0)
		pthread_create(&t, NULL, vforker, NULL);
	double start = now();
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.w", out);
	for (;;) {
		FILE *f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "progress %lu rt %lu\n", atomic_load(&progress), atomic_load(&rt_count));
			fclose(f);
			rename(tmp, out);
		}
		if (strcmp(argv[1], "exec") == 0 && now() - start > 1.0) {
			char *args[] = {argv[0], "spin", argv[2], argv[3], NULL};
			execv("/proc/self/exe", args);
		}
		usleep(20000);
	}
}
