// Package gdbstack asks gdb for the call stacks of a live process, as the
// ground truth stacktop's own unwinder is compared with in tests.
//
// Backtrace attaches gdb in batch mode (gdb -nx -batch -p PID), runs
// "thread apply all bt" and parses what gdb prints into frames per thread
// (LWP id). gdb is told to print every frame's address (print frame-info
// location-and-address) and to elide arguments (print frame-arguments none),
// so each frame line has a fixed shape:
//
//	#0  0x000055d0c0a4565c in recurse_leaf ()
//	#3  0x00007f5a10f121f5 in start_thread (arg=...) at ./nptl/pthread_create.c:442
//	#4  0x00007f5a10f928ec in clone3 () from /lib/x86_64-linux-gnu/libc.so.6
//	#2  <signal handler called>
//
// The parser is separate (Parse) so it can be tested and fuzzed on saved
// output: unknown lines (gdb's notices, warnings, source lines) are skipped,
// and a frame line that cannot be read is an error naming its line number.
//
// Process state: gdb attaches with ptrace and detaches when done. A target
// that was running keeps running; a target that was in group-stop (SIGSTOP,
// state T) is left stopped: gdb 13 notices the stop at attach time and
// restores it on detach (checked by TestBacktraceChains).
package gdbstack
