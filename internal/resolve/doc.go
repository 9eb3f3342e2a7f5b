// Package resolve turns a thread sample (registers and a copy of the top of
// its stack: backend.Sample) into a named stack, the same way whichever
// back end took it:
//
//	backend.Sample -> unwind (procmaps, sframe, cfi, backchain, gort) ->
//	symbols + debuginfo -> profile.Frame
//
// dump and the sampling engine both stand on it; it never stops a thread
// and issues no ptrace request. It reads the process's memory only through
// the reader it is given (process_vm_readv): frames beyond a sample's
// stack copy, the vDSO image, and the Go runtime's g for stack switches.
//
// Lifecycle: New loads the process's address space (a 32-bit program is
// refused, ErrNot64Bit); Resolve (or Walk then Name, for a dump that names
// its frames after sampling every thread) is called for each sample, on
// one goroutine at a time; Reload after the back end reports an exec
// (backend.Round.Exec); Close at the end. A PC outside every known mapping
// (dlopen since) makes the next walk read the maps again, once.
//
// Pauses: a back end that stops threads (ptrace) resumes a thread before
// its sample is resolved. Frames beyond the stack copy are read from the
// live process, which is consistent for the outer frames of a running
// thread (they do not change while it runs below them) and exact under
// Freeze, but not for a thread that has left them since. So Walk reports
// in Sample.StackUse how far up the walk read the thread's stack mapping
// and how many reads the copy lacked: ptrace sizes the thread's next
// copies from it, and the engine counts such samples.
//
// Tail calls: between an unwound callee and its caller, the functions that
// left the stack by jumping are put back from DWARF call sites
// (tailcall.go, method "tailcall"), as gdb does; SymbolOptions.NoLines
// turns that off with the rest of DWARF.
//
// Lines: dump waits for the DWARF a stack needs. The engine never does
// (SymbolOptions.AsyncLines): a stack whose lines are not read yet comes
// back with Stack.Pending (its walk), and Rename names that walk again
// once Readiness says something loaded, so that file:line and inlined
// frames do not depend on when a stack was sampled.
//
// Loading: a module's symbol table, line tables, call sites and function
// names each load once, on goroutines of their own where nothing waits for
// them yet, and side by side (the line tables and names need only the
// debug file, not the symbol table): PrefetchLines starts them for the
// modules of a walk, PrefetchCommon for the program and its C library
// before any walk, and naming waits only for what a frame needs. Close
// does not wait for loads under way: their reads of the closed files fail.
//
// Names are kept per unwound frame (its PC, method and exactness) and per
// callee and caller for tail calls (namecache.go): a thousand threads
// blocked in the same call are named once. The cache is dropped whenever
// the address space, read again, has changed (and on Reload), and keeps
// no answer given while lines were pending. Across runs, each module's
// source frames and tail-call chains by address are kept in the cache
// directory (learned.go), so stacks in places named before need no DWARF;
// where a module learned answers, PrefetchLines and PrefetchCommon start
// no line tables for it.
//
// Go: a thread on its system stack inside runtime.systemstack goes on to
// its goroutine's frames (gostack.go, gort/, method "gostack"). The
// runtime's g, m and g.sched are read from the live process after the
// thread resumed: exact under Freeze and for a thread blocked in a system
// call; a thread that has left the switch since shows no such frames
// (systemstack clears g.sched.sp on its way back, which the switch rejects).
//
// README.md says why the package is cut as it is.
package resolve
