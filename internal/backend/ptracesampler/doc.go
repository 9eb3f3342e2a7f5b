// Package ptracesampler is the ptrace back end: it takes thread samples
// (registers and a copy of the top of the stack) by stopping each thread
// for a few microseconds, and yields them through the back-end seam
// (backend.Source), where the resolver and the engine take over.
//
// Lifecycle: Open attaches to a process (every thread, PTRACE_SEIZE: no
// signal, no stop); Next waits for the next tick and samples it; Close
// detaches, on every path. OpenDump is the one-shot form for `stacktop
// dump`: thread list, Freeze/Thaw, batches of samples that detach each
// thread at its sample's stop, with each thread's name and state as /proc
// showed it before the stop. OpenDump attaches lazily
// (ptrace.Tracer.AttachLazy): only the main thread at the open, which is
// where a refusal shows; each other thread is seized by the batch that
// samples it, just before its stop, so no thread is traced before its
// turn nor after its sample, the tracer does not seize a thousand threads
// before the first sample, and with only the threads in flight traced
// one wait polls them all. Its thread list is then /proc's. A dump that
// freezes, or a stopped process, is attached whole at the open. Both run
// their
// ptrace requests on a ptrace.Tracer, which serialises those of all
// processes on its locked OS thread.
//
// Pauses: a thread is stopped only while its registers and a bounded window
// of its stack (Options.StackWindow bytes above SP, more for a thread
// whose walks needed more: stacks.go) are copied; it is resumed before its
// sample is yielded, so the consumer's unwinding never extends a stop.
// What a walk needed comes back in Sample.StackUse, which the consumer
// sets during yield. A dump copies each thread's used stack instead
// (stacks.go). A tick's threads are sampled in one batch on the tracer
// thread (ptrace.Process.SampleBatch), with a per-tick deadline: a thread
// that does not stop in time is left running and counted NotTaken.
//
// Pacing: ticks come at Options.Rate with ±20% jitter (no aliasing with
// the target's periodic work); a tick more than a period late is missed
// (Round.Missed), not run in a burst.
//
// Which threads: a tick's work grows with the threads that run, not with
// the threads that exist. check.go explains the schedule of schedstat
// readings, ledger.go how the process's CPU clock proves idle threads idle
// without reading them (and lets a batch skip its drain), weight.go which
// threads an on-CPU tick samples (those running at the tick, not waiting in
// the kernel at their stop) and how a sample is weighted by the CPU time
// its thread used (Sample.Weight).
// With Options.Idle (wall-clock), a thread that did not run is yielded
// Unchanged instead of being stopped again.
//
// Exec: a tick that finds the process replaced its program returns at
// once with Round.Exec and no samples, so the consumer reloads its address
// space before it sees a sample of the new program; the next Next takes
// the tick.
package ptracesampler
