/*
 * cputime: runs a command and prints its wall time and its CPU time (user
 * plus system, from wait4's rusage, which the kernel derives from its
 * nanosecond run-time accounting) in milliseconds, to 0.01 ms, on stderr
 * as "cputime: WALL CPU". The command's own output is left alone. On a
 * loaded machine the CPU time says more than the wall time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec a, b;
	struct rusage ru;
	int status;
	pid_t pid;

	if (argc < 2) {
		fprintf(stderr, "usage: cputime CMD [ARG...]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		perror(argv[1]);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0) {
		perror("wait4");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	fprintf(stderr, "cputime: %.2f %.2f\n",
		(b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6,
		(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
