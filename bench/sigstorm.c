/*
 * sigstorm: a signal storm against a CPU-bound process, to measure how a
 * tracer delays signals and slows the target.
 *
 *   sigstorm target SECONDS   two worker threads spin in fixed work; prints
 *                             "tids T1 T2", waits 0.5 s (time to attach),
 *                             then counts work for SECONDS and prints
 *                             "work X Mit/s signals N latency-us p50 A p99 B
 *                             max C" and exits. SIGRTMIN's handler takes
 *                             the send time from si_value (CLOCK_MONOTONIC
 *                             ns) and records the delivery latency.
 *   sigstorm send PID T1,T2 RATE SECONDS
 *                             sends RATE signals a second for SECONDS,
 *                             thread-directed (rt_tgsigqueueinfo) to the
 *                             TIDs in turn, each stamped with its send
 *                             time; prints how many it sent and how many
 *                             the kernel refused (queue full).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define NBUCKET 100000 /* 10 us each: up to 1 s */
static unsigned long hist[NBUCKET + 1];
static volatile int measuring;
static volatile unsigned long received;
static volatile unsigned long work[2];
static volatile int worker_tid[2];
volatile unsigned long sink;

static void on_sig(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	if (!measuring)
		return;
	long long d = now_ns() - (long long)si->si_value.sival_ptr;
	long b = d < 0 ? 0 : d / 10000;
	if (b > NBUCKET)
		b = NBUCKET;
	__atomic_add_fetch(&hist[b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&received, 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void unit(void)
{
	for (int i = 0; i < 1000; i++)
		sink += i;
}

static void *worker(void *arg)
{
	long k = (long)arg;
	worker_tid[k] = (int)syscall(SYS_gettid);
	for (;;) {
		for (int i = 0; i < 100; i++)
			unit();
		work[k] += 100;
	}
	return NULL;
}

static double quantile(unsigned long n, double q)
{
	unsigned long rank = (unsigned long)(q * (double)(n - 1)) + 1, seen = 0;
	for (long b = 0; b <= NBUCKET; b++) {
		seen += hist[b];
		if (seen >= rank)
			return (b + 1) * 10.0;
	}
	return NBUCKET * 10.0;
}

static int target(double secs)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sig;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGRTMIN, &sa, NULL);
	pthread_t th[2];
	for (long k = 0; k < 2; k++)
		pthread_create(&th[k], NULL, worker, (void *)k);
	while (!worker_tid[0] || !worker_tid[1])
		usleep(1000);
	printf("tids %d,%d\n", worker_tid[0], worker_tid[1]);
	fflush(stdout);
	usleep(500000);
	unsigned long w0 = work[0] + work[1];
	long long t0 = now_ns();
	measuring = 1;
	struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	measuring = 0;
	unsigned long w1 = work[0] + work[1];
	double el = (now_ns() - t0) / 1e9;
	unsigned long n = received, mx = 0;
	for (long b = 0; b <= NBUCKET; b++)
		if (hist[b])
			mx = b;
	printf("work %.2f Mit/s signals %lu latency-us p50 %.0f p99 %.0f max %lu\n",
	       (w1 - w0) * 1000.0 / el / 1e6, n, n ? quantile(n, 0.5) : 0,
	       n ? quantile(n, 0.99) : 0, n ? (mx + 1) * 10 : 0);
	fflush(stdout);
	_exit(0);
}

static int sender(int pid, const char *tidlist, double rate, double secs)
{
	int tids[2], nt = sscanf(tidlist, "%d,%d", &tids[0], &tids[1]);
	if (nt < 1)
		return 2;
	long long period = (long long)(1e9 / rate), start = now_ns(), next = start;
	long long end = start + (long long)(secs * 1e9);
	unsigned long sent = 0, refused = 0;
	for (unsigned long i = 0; next < end; i++) {
		struct timespec at = {next / 1000000000LL, next % 1000000000LL};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
			;
		siginfo_t si;
		memset(&si, 0, sizeof si);
		si.si_signo = SIGRTMIN;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_ptr = (void *)now_ns();
		if (syscall(SYS_rt_tgsigqueueinfo, pid, tids[i % nt], SIGRTMIN, &si) == 0)
			sent++;
		else if (errno == EAGAIN)
			refused++;
		else
			break; /* the target is gone */
		next += period;
	}
	printf("sent %lu refused %lu\n", sent, refused);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "target"))
		return target(atof(argv[2]));
	if (argc >= 6 && !strcmp(argv[1], "send"))
		return sender(atoi(argv[2]), argv[3], atof(argv[4]), atof(argv[5]));
	fprintf(stderr, "usage: sigstorm target SECONDS | sigstorm send PID T1,T2 RATE SECONDS\n");
	return 2;
}
