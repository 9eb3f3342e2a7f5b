/* cprog.c: C test target for the symbols package: global and static
 * functions, a PLT call into libc (puts), and an address-taken libc
 * function (abort) so the linker may emit a .plt.got entry, and aliases. */
#include <stdio.h>
#include <stdlib.h>

static int __attribute__((noinline)) static_helper(int x)
{
	return x * 3 + 1;
}

int __attribute__((noinline)) global_worker(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += static_helper(i);
	return s;
}

/* Aliases of global_worker with every binding: Lookup must name the
 * address after the global one. */
extern int weak_worker_alias(int) __attribute__((weak, alias("global_worker")));
static int local_worker_alias(int) __attribute__((alias("global_worker"), used));

void __attribute__((noinline, weak)) weak_hook(void)
{
	puts("weak hook");
}

void (*volatile exit_fn)(void) = abort;

int main(int argc, char **argv)
{
	(void)argv;
	puts("cprog");
	weak_hook();
	if (argc > 5)
		exit_fn();
	if (argc > 6)
		abort();
	return global_worker(argc) & 1;
}
