/*
 * forker: a shell-like process whose child does the work.
 * Prints "ready", waits 200 ms, forks a child that spins in child_spin
 * (and dies with its parent), and spins in parent_spin itself for ever.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void child_spin(void)
{
	for (;;)
		sink++;
}

__attribute__((noinline)) void parent_spin(void)
{
	for (;;)
		sink++;
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	usleep(200000);
	pid_t parent = getpid();
	if (fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			return 0;
		child_spin();
	}
	parent_spin();
}
