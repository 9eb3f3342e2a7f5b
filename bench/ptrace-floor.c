/*
 * ptrace-floor PID [N [WINDOW]]: the physical floor of one ptrace thread
 * sample on this machine, to compare stacktop's pause with. SEIZE once,
 * then N times: PTRACE_INTERRUPT -> waitpid -> PTRACE_GETREGSET ->
 * process_vm_readv(WINDOW bytes from SP) -> PTRACE_CONT, 1 ms apart, timed
 * with CLOCK_MONOTONIC. Prints the median, p99 and max of "stopped" (wait
 * returned -> CONT returned, what stacktop reports as the pause) and
 * "total" (INTERRUPT issued -> CONT returned), in microseconds, as
 *   floor stopped median 12.3 p99 45.6 max 78.9 total median ...
 * With SPIN=1 in the environment the wait polls (WNOHANG) instead of
 * sleeping, as stacktop does while it has a CPU to itself: the difference
 * is the tracer's own wake-up, which the stopped thread waits for.
 * INTERVAL_US=N sets the time between samples (default 1000, the shipped
 * floor's): 10000 is the cadence of stacktop's default 99 Hz.
 * A target that exits ends the run early; the samples so far are reported.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: ptrace-floor PID [N [WINDOW]]\n");
		return 2;
	}
	pid_t pid = atoi(argv[1]);
	int n = argc > 2 ? atoi(argv[2]) : 2000;
	size_t win = argc > 3 ? (size_t)atol(argv[3]) : 16384;
	char *buf = malloc(win);
	double *stopped = malloc(n * sizeof *stopped), *total = malloc(n * sizeof *total);
	if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0) {
		perror("PTRACE_SEIZE");
		return 1;
	}
	int spin = getenv("SPIN") != NULL;
	useconds_t interval = getenv("INTERVAL_US") ? (useconds_t)atol(getenv("INTERVAL_US")) : 1000;
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		ptrace(PTRACE_INTERRUPT, pid, 0, 0);
		int st;
		pid_t w;
		while ((w = waitpid(pid, &st, __WALL | (spin ? WNOHANG : 0))) == 0)
			;
		if (w != pid) {
			if (errno == ECHILD && i > 0) {
				n = i; /* the target exited */
				break;
			}
			perror("waitpid");
			return 1;
		}
		double t1 = now_us();
		struct user_regs_struct r;
		struct iovec io = {&r, sizeof r};
		ptrace(PTRACE_GETREGSET, pid, NT_PRSTATUS, &io);
		struct iovec local = {buf, win}, remote = {(void *)r.rsp, win};
		process_vm_readv(pid, &local, 1, &remote, 1, 0);
		ptrace(PTRACE_CONT, pid, 0, 0);
		double t2 = now_us();
		stopped[i] = t2 - t1;
		total[i] = t2 - t0;
		usleep(interval);
	}
	ptrace(PTRACE_DETACH, pid, 0, 0);
	qsort(stopped, n, sizeof *stopped, cmp);
	qsort(total, n, sizeof *total, cmp);
	printf("floor stopped median %.1f p99 %.1f max %.1f total median %.1f p99 %.1f max %.1f (us, %d samples, %zu B)\n",
	       stopped[n / 2], stopped[n * 99 / 100], stopped[n - 1],
	       total[n / 2], total[n * 99 / 100], total[n - 1], n, win);
	return 0;
}
