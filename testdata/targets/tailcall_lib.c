/*
 * tailcall_lib: the shared object of tailcall's "libwait" thread, built
 * -O2 -g -shared by stackdump/tailcall_live_test.go. tailcall calls
 * lib_wait through the PLT; lib_wait ends in a jump to lib_block, so the
 * stack goes from lib_block straight to tailcall's lib_thread, and the
 * tail call is in this object's call sites, not the caller's:
 *
 *   libwait   pause (libc) <- lib_block <- lib_wait (tail call, this
 *             object) <- lib_thread (tailcall) <- start_thread
 */
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile int lib_sink, lib_stop;

/* Internal: reached only by lib_wait's jump. It returns (as far as the
 * compiler knows): GCC does not jump to a function that cannot. */
static NOINLINE void lib_block(void)
{
	while (!lib_stop) {
		pause();
		lib_sink++;
	}
}

/* Exported, called through the PLT; ends in a jump. */
void lib_wait(void) { lib_block(); }
