/*
 * nocfi: code with neither unwind tables nor frame pointers (built with
 * -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables,
 * and the .eh_frame of the whole program removed), blocked in libc:
 *
 *   "noinfo" pause <- nocfi_leaf <- nocfi_mid <- nocfi_thread <-
 *            start_thread <- clone3
 *
 * Nothing tells an unwinder where nocfi_leaf's caller is. The frame
 * pointer register holds whatever the code left in it (zero here: the
 * thread's first function clears it), which must not pass for the end of
 * the stack: such a walk is truncated, not complete. The main thread
 * sleeps in nanosleep (also without CFI above libc) and writes the progress
 * file.
 */
#include "target.h"

#include <pthread.h>

static volatile unsigned long sink;

TARGET_FN void nocfi_leaf(void)
{
	/* rbp is a general register here: clear it, as code that uses it
	 * for data may. */
	__asm__ volatile("xor %%ebp, %%ebp" ::: "rbp");
	for (;;)
		pause();
}

TARGET_FN void nocfi_mid(void)
{
	volatile char buf[64];
	buf[0] = 1;
	nocfi_leaf();
	sink += buf[0];
}

TARGET_FN void *nocfi_thread(void *arg)
{
	(void)arg;
	nocfi_mid();
	return NULL;
}

int main(void)
{
	pthread_t th;
	if (pthread_create(&th, NULL, nocfi_thread, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}
	pthread_setname_np(th, "noinfo");
	announce_ready();
	for (unsigned long long n = 1;; n++) {
		progress_write(n);
		progress_sleep_ms(10);
	}
}
