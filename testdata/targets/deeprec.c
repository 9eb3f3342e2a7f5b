/*
 * deeprec [DEPTH]: a thread ("deep") DEPTH frames deep (default 2000), in a
 * recursion of the program's own code, blocked in pause() at the bottom:
 *
 *   "deep"  pause <- deep_block <- deep_rec x DEPTH <- deep_thread
 *           <- start_thread <- clone3
 *   main    the progress loop (ready_then_tick)
 *
 * Deeper than a sampler's old cap of 256 frames and than its 16 KiB stack
 * window (each frame is 32 bytes or more): a dump must walk it whole and
 * agree with gdb frame by frame. deep_rec uses its callee's result after
 * the call, so the compiler cannot turn the recursion into a loop.
 */
#include "target.h"

#include <pthread.h>

static volatile int parked;
static volatile int sink;

TARGET_FN void deep_block(void)
{
	__sync_fetch_and_add(&parked, 1);
	for (;;)
		pause();
}

TARGET_FN int deep_rec(int n)
{
	if (n <= 1) {
		deep_block();
		return 0;
	}
	int r = deep_rec(n - 1);
	sink += r;
	return r + 1;
}

static int depth = 2000;

TARGET_FN void *deep_thread(void *arg)
{
	(void)arg;
	deep_rec(depth);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		depth = atoi(argv[1]);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 8 << 20);
	pthread_t th;
	int err = pthread_create(&th, &attr, deep_thread, NULL);
	if (err != 0)
		die("pthread_create", err);
	pthread_setname_np(th, "deep");
	while (parked < 1)
		progress_sleep_ms(1);
	ready_then_tick();
}
