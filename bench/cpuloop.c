/*
 * cpuloop SECONDS [STACK_KIB]: a CPU-bound single thread that reports its
 * own speed.
 * Spins for SECONDS of wall time in a loop of fixed work and prints the
 * iterations per second (millions) on stdout, per second of wall time and
 * per second of its own CPU time:  "cpuloop 123.45 Mit/s 130.10 Mit/cpus".
 * A sampler's slowdown is the drop of the first figure against unsampled
 * runs. The second is blind to time spent stopped (ptrace) but not to the
 * kernel's work in the thread's interrupts (perf_event), and holds on a
 * loaded machine, where the wall-time figure mostly measures the load.
 *
 * With STACK_KIB the loop runs below a frame of that many KiB (touched,
 * so resident): a sampler's copy of the stack (perf's stack window,
 * ptrace's process_vm_readv) is then whole, as in a thread deep in its
 * calls, instead of ending a few KiB up at the top of the main thread's
 * stack.
 *
 * Marks: at each SIGUSR1 the loop prints, at its next pass (within about
 * a millisecond), "mark MONO_NS ITERATIONS CPU_NS": CLOCK_MONOTONIC, the
 * iterations so far and the thread's CPU time, all read at the same
 * point. Two marks bound a window whose speed a script can compute
 * exactly, whenever it sent the signals (bench/perf-backends.sh).
 * Without IRQ time accounting (most distribution kernels) the CPU time
 * includes the interrupts the thread took, and with paravirtual steal
 * time it excludes time the host gave another guest.
 *
 * Gaps (x86-64): the loop reads the TSC after every call of work()
 * (about 0.3 µs apart); a step of more than 3 µs and less than 1 ms is
 * time the thread lost to something short: an interrupt (the timer, a
 * perf_event sample and the VM exits around it), a ptrace stop. A step
 * during which the thread was preempted (its involuntary context
 * switches, getrusage, moved) is left out: on a shared machine other
 * programs' short runs on the thread's CPU are most of the gaps, and
 * they are noise here. Marks then also carry "TSC GAP_CYCLES GAPS" (the
 * TSC, the sum of the kept steps in cycles and their number), so a
 * script can tell the time a sampler takes from the thread in its
 * interrupts and stops, a figure that, unlike the speed, does not move
 * with the CPU's speed, the caches other programs leave behind, or their
 * share of the CPU. Longer steps (the host running another guest on
 * this vCPU) are left out too.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

volatile unsigned long sink;
static volatile sig_atomic_t marked;

static double clock_s(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static long long clock_ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static void on_mark(int sig) { (void)sig; marked = 1; }

#if defined(__x86_64__)
#include <x86intrin.h>
static unsigned long long tsc(void) { return __rdtsc(); }
#define HAVE_TSC 1
#else
static unsigned long long tsc(void) { return 0; }
#define HAVE_TSC 0
#endif

/* tsc_per_us measures the TSC's rate against CLOCK_MONOTONIC (20 ms). */
static double tsc_per_us(void)
{
	if (!HAVE_TSC)
		return 1;
	long long m0 = clock_ns(CLOCK_MONOTONIC);
	unsigned long long t0 = tsc();
	while (clock_ns(CLOCK_MONOTONIC) - m0 < 20000000)
		;
	return (tsc() - t0) / ((clock_ns(CLOCK_MONOTONIC) - m0) / 1e3);
}

__attribute__((noinline)) static void work(void)
{
	for (int i = 0; i < 1000; i++)
		sink += i;
}

static int loop(double secs);

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	long kib = argc > 2 ? atol(argv[2]) : 0;
	if (kib > 0) {
		volatile char *pad = __builtin_alloca(kib * 1024);
		for (long i = 0; i < kib * 1024; i += 64)
			pad[i] = 1;
		int r = loop(secs);
		return r + pad[0] - 1;
	}
	return loop(secs);
}

__attribute__((noinline)) static int loop(double secs)
{
	struct sigaction sa = {.sa_handler = on_mark, .sa_flags = SA_RESTART};
	sigaction(SIGUSR1, &sa, NULL);
	double rate = tsc_per_us();
	unsigned long long gap_min = 3 * rate, gap_max = 1000 * rate, gap_cycles = 0, gaps = 0;
	double start = now(), end = start + secs, t;
	double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	unsigned long iters = 0;
	struct rusage ru0;
	getrusage(RUSAGE_THREAD, &ru0);
	long nivcsw = ru0.ru_nivcsw;
	unsigned long long prev = tsc();
	do {
		for (int i = 0; i < 1000; i++) {
			work();
			unsigned long long c = tsc(), d = c - prev;
			if (d > gap_min && d < gap_max) {
				struct rusage ru;
				getrusage(RUSAGE_THREAD, &ru);
				if (ru.ru_nivcsw == nivcsw) {
					gap_cycles += d;
					gaps++;
				}
				nivcsw = ru.ru_nivcsw;
				c = tsc(); /* not the system call's own time */
			}
			prev = c;
		}
		iters += 1000;
		if (marked) {
			marked = 0;
			printf("mark %lld %lu %lld %llu %llu %llu\n", clock_ns(CLOCK_MONOTONIC), iters,
			       clock_ns(CLOCK_THREAD_CPUTIME_ID), tsc(), gap_cycles, gaps);
			fflush(stdout);
			prev = tsc();
		}
	} while ((t = now()) < end);
	double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	printf("cpuloop %.2f Mit/s %.2f Mit/cpus\n", iters / (t - start) / 1e6, iters / cpu / 1e6);
	return 0;
}
