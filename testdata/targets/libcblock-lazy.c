/*
 * libcblock-lazy.so: the shared library of libcblock. lazy_fn is an IFUNC:
 * the executable binds it lazily, so its resolver runs inside the dynamic
 * linker's lazy binding (_dl_runtime_resolve -> _dl_fixup) the first time
 * the executable calls it. The resolver blocks there in a raw read(2) on
 * lazy_fd until a byte arrives, so a test can catch a thread in the middle
 * of lazy binding every time, not by luck.
 */
#include "target.h"

volatile int lazy_resolving;
int lazy_fd = -1;

static int lazy_impl(int x) { return x + 1; }

typedef int lazy_fn_type(int);

TARGET_FN lazy_fn_type *lazy_resolver(void)
{
	char c;
	lazy_resolving = 1;
	/* Raw system call: libc's read would be another lazily bound call. */
	while (raw_syscall3(SYS_read, lazy_fd, (long)&c, 1) != 1) {
	}
	return lazy_impl;
}

int lazy_fn(int) __attribute__((ifunc("lazy_resolver")));
