// Package sampler turns threads of a live process into symbolised stacks.
// It is the one place where the pipeline is wired together:
//
//	ptrace (registers + a copy of the stack) -> unwind (with procmaps and
//	sframe) -> symbols -> profile.Frame
//
// dump, record and top all stand on it.
//
// Lifecycle: Open attaches to a process (every thread, PTRACE_SEIZE: no
// signal, no stop) and loads its address space; StackEach samples a batch
// of threads in one trip to the tracer thread (dump); an Engine samples
// periodically (record, top); Close detaches. A Target is used from one
// goroutine; the ptrace.Tracer it runs on serialises the ptrace requests of all targets on its locked OS
// thread.
//
// Pauses: a thread is stopped only while its registers and a bounded window
// of its stack (Options.StackWindow bytes above SP) are copied; it is
// resumed before the unwinder runs. Frames beyond the window are read from
// the live process, which is consistent for the outer frames of a running
// thread (they do not change while it runs below them) and exact under
// Freeze.
//
// Tail calls: between an unwound callee and its caller, the functions that
// left the stack by jumping are put back from DWARF call sites
// (tailcall.go, method "tailcall"), as gdb does; SymbolOptions.NoLines
// turns that off with the rest of DWARF.
//
// Lines: dump waits for the DWARF a stack needs. An Engine never does
// (SymbolOptions.AsyncLines): a stack whose lines are not read yet is added
// with what the symbol tables say, its walk kept, and its frames replaced
// (profile.SetFrames) once the lines are ready, at a later tick or, at the
// latest, before Run returns; so file:line and inlined frames do not
// depend on when a stack was sampled. Run's end waits at most lateWait
// (2 s) for them, with no thread stopped, and an exec not at all: stacks
// still pending then keep their frames without lines.
//
// Go: a thread on its system stack inside runtime.systemstack goes on to
// its goroutine's frames (gostack.go, gort/, method "gostack"). The
// runtime's g, m and g.sched are read from the live process after the
// thread resumed: exact under Freeze and for a thread blocked in a system
// call; a thread that has left the switch since shows no such frames
// (systemstack clears g.sched.sp on its way back, which the switch rejects).
//
// Cost: an Engine's tick grows with the threads that run, not with the
// threads that exist. check.go explains the schedule of schedstat
// readings, ledger.go how the process's CPU clock proves idle threads idle
// without reading them, and lets a batch skip its drain.
package sampler
