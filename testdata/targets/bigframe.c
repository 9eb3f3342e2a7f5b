/*
 * bigframe: frames larger than the 16 KiB stack window a sampler copies by
 * default, each thread blocked in a system call under them:
 *
 *   main      pause <- big_block <- big_main (40 KiB of locals) <- main
 *   "bigthr"  pause <- big_block <- big_inner (40 KiB) <- big_outer
 *             (24 KiB) <- big_thread <- start_thread <- clone3
 *
 * The callers of the big frames lie beyond the window: a walk finds them
 * only in a copy of the thread's whole used stack (its return address,
 * found by CFI, is 40 KiB above SP), or by reading the live process.
 */
#include "target.h"

#include <pthread.h>

static volatile int parked;

TARGET_FN void big_block(volatile char *buf)
{
	buf[0]++;
	__sync_fetch_and_add(&parked, 1);
	for (;;)
		pause();
}

TARGET_FN void big_inner(int x)
{
	volatile char buf[40 << 10];
	buf[0] = (char)x;
	buf[sizeof buf - 1] = (char)x;
	big_block(buf);
	buf[1]++;
}

TARGET_FN void big_outer(int x)
{
	volatile char buf[24 << 10];
	buf[0] = (char)x;
	buf[sizeof buf - 1] = (char)x;
	big_inner(buf[0] + buf[sizeof buf - 1]);
	buf[1]++;
}

TARGET_FN void *big_thread(void *arg)
{
	(void)arg;
	big_outer(1);
	return NULL;
}

TARGET_FN void big_main(int x)
{
	volatile char buf[40 << 10];
	buf[0] = (char)x;
	buf[sizeof buf - 1] = (char)x;
	while (parked < 1)
		progress_sleep_ms(1);
	announce_ready();
	big_block(buf);
	buf[1]++;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, big_thread, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}
	pthread_setname_np(t, "bigthr");
	big_main(2);
	return 0;
}
