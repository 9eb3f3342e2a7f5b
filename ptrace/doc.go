// Package ptrace is the only part of stacktop that issues ptrace requests.
// It stops threads of a running process for as short a time as it can,
// reads their registers and the stack bytes above the stack pointer, and
// lets them go, without ever changing what the target sees: no signal is
// lost, a stopped process stays stopped, nothing is left traced.
//
// # Lifecycle
//
//	tr := ptrace.NewTracer()     // starts the tracer thread
//	defer tr.Close()             // detaches everything left, ends the thread
//	p, err := tr.Attach(pid)     // *AttachError says why not, and what to do
//	p, err := tr.AttachLazy(pid) // or: main thread only, the rest seized by batches (dump)
//	l, err := ptrace.ListThreads(pid); p, err := tr.AttachLazyListed(l) // the same, with a listing the caller shares
//	defer p.Detach()             // idempotent; also tr.DetachAll on signals
//	s, err := p.Sample(tid, 16<<10, stackEnd)   // or SampleInto to reuse buffers
//	p.SampleBatch(tids, opts, each)             // many threads, stops overlapped
//	p.SampleBatch(tids, BatchOptions{Release: true}, each) // once: detach each at its sample
//	p.Freeze(); ...; p.Thaw()    // consistent snapshot of all threads
//
// Memory (NewMemory) reads target memory from any goroutine with
// process_vm_readv, falling back to /proc/PID/mem.
//
// # One thread
//
// The kernel binds a tracee to the tracer thread, not the tracer process:
// requests from any other thread fail with ESRCH. A Tracer therefore runs
// one goroutine locked to its OS thread for good (runtime.LockOSThread,
// never unlocked: if that goroutine ends, the runtime ends the thread and
// the kernel detaches its tracees, which keep running). Every method sends
// a closure to it and waits, so methods are safe for concurrent use, and
// Detach/DetachAll work from a signal-handling goroutine or a deferred
// recover. Waits use __WNOTHREAD so only this thread's tracees are seen,
// and never an exit status of a child the program forked itself: the
// tracer thread is neither the main thread (to which the kernel gives
// the children of a thread that ends) nor one that forked (NewTracer
// tries up to eight threads for one), and no request forks, so a wait for
// any tracee finds tracees only. Where it could not get such a thread, a
// wait for any tracee peeks with WNOWAIT before consuming, and leaves a
// child's status to its owner.
//
// # Why SEIZE and INTERRUPT
//
// PTRACE_ATTACH sends SIGSTOP, which a target can observe and which
// confuses job control; PTRACE_SEIZE attaches silently and keeps the stop
// kinds apart: PTRACE_INTERRUPT gives a stop of our own (a PTRACE_EVENT_STOP
// with SIGTRAP), distinct from a group-stop (PTRACE_EVENT_STOP with the stop
// signal) and from a signal-delivery-stop. A thread blocked in a system
// call is pulled out by INTERRUPT and the call is restarted on resume.
// Options: PTRACE_O_TRACECLONE (threads created later are traced from
// birth; not for a lazy Process, see below) and PTRACE_O_TRACEEXEC
// (without it the kernel sends a SIGTRAP after execve, fatal if
// delivered). Never PTRACE_O_EXITKILL: if stacktop dies, its targets live.
//
// # Signals, group-stop, threads coming and going
//
// Each thread has a state (running, listening, held, newborn) and a
// pending signal; the state decides the resume request:
//
//   - signal-delivery-stop: the signal is kept and passed to PTRACE_CONT
//     (or PTRACE_DETACH), so it is delivered; resuming with 0 would drop it.
//     A sample may be taken at that stop.
//   - group-stop (SIGSTOP/SIGTSTP/SIGTTIN/SIGTTOU): resumed with
//     PTRACE_LISTEN, which keeps the thread stopped but lets a later SIGCONT
//     wake it; CONT would undo the stop. Sampling a group-stopped thread
//     interrupts it out of LISTEN and listens again. A process stopped
//     before Attach is reported by the kernel as such a group-stop right
//     after SEIZE; after PTRACE_DETACH the kernel puts it back into
//     group-stop (state T).
//   - PTRACE_EVENT_CLONE: the new thread joins the process's thread list;
//     its first stop is resumed. Attach also lists /proc/PID/task until no
//     new TID appears, skipping threads that vanish (ESRCH).
//   - exits: a thread's exit gives ErrThreadExited, the last one (or the
//     main thread's) ErrProcessExited; neither is fatal to the Tracer.
//
// Every ptrace-stop also sends SIGCHLD to the tracer; the tracer thread
// handles events of threads nobody is sampling (a signal is delivered, a
// group-stop listened to, a new thread resumed) within 2 ms of the signal,
// and polls every 100ms in case a SIGCHLD was missed. The drain is rate
// limited because its wait walks every traced thread in the kernel, and
// sampling itself raises a SIGCHLD per stop. Signals are not: after a
// drain that delivered one, the next SIGCHLD is handled at once, and the
// thread is polled for 50 µs in case another signal is queued for it
// (under a storm each signal would otherwise pay a trip through Go's
// signal handling and the scheduler, and the queue would grow without
// end). A drain gives up after 2 ms and resumes after pending requests,
// so a storm does not starve sampling. During a batch, a drain runs every
// 50 µs to 2 ms (more tracees, longer gaps: each drain walks them all):
// stops of threads outside it do not wait for its end.
//
// # Batches
//
// SampleBatch (SampleEach, and the ticks of record and top) overlaps the
// stop latency of many threads: it interrupts a window of up to 32
// threads, polls each with a wait4 of its own TID (O(1), where a wait for
// any tracee walks all of them; the first poll right after its interrupt,
// since a sleeping thread woken on the tracer's CPU stops at once, and
// all of them every few interrupts, for those woken on another CPU;
// lazily, one wait for any tracee polls them all: see Lazy seizing),
// samples each as it stops into a buffer of its own and resumes it at
// once; when the window is done its samples are handed to the caller (to
// unwind, on the caller's goroutine, while the tracer thread samples the
// next window), so a thread is stopped for its own sample only, however
// slow the caller. A deadline (or a cancel
// channel) ends a batch early: threads not stopped by then get
// ErrNotTaken and run on; their interrupt stop, when it comes, is resumed
// by a drain. With Overlap (a dump) the windows slide: the tracer thread
// runs window after window in one trip, keeps 16 threads in flight and
// carries those still in flight into the next window, handing each
// window's samples to the caller through a channel; it carries only into
// slots the caller is done with, so no thread waits for the caller. Every
// 6 ms it lets a window end without carrying and yields to the Go
// scheduler with no thread in flight (slideYieldEvery), so that Go
// seldom preempts it with threads stopped.
//
// # Lazy seizing
//
// Attach seizes every thread before the first sample: for a thousand
// threads a SEIZE and a wait4 each, 6-20 ms of the tracer thread on a
// loaded 2-CPU machine, and a thousand tracees that every wait for any
// tracee then walks. A one-shot dump needs neither. AttachLazy seizes
// only the main thread (so a refusal, from permissions, ptrace_scope or a
// container, is still an *AttachError of the open, with its advice) and
// lists /proc/PID/task; a batch seizes each further thread right before
// its INTERRUPT, in its flight, and (with Release) detaches it at its
// sample's stop. The tracer's tracees are then the main thread and the
// threads in flight, so a poll round is one wait for any tracee (pollAny,
// the wait of a drain) instead of one
// wait4 per flight, most of which found nothing; every status that is not
// a flight's (the main thread's group-stop or signal, an exit) goes to
// dispatch, as a drain would take it, and no separate drain is due.
//
// Lazily, the thread list is /proc's (ListThreads), not the traced set:
// a dump lists again after each batch until a listing holds no thread it
// has not seen, which is how a thread created during the dump is found.
// A dump lists once at its open, for the attach (AttachLazyListed), for
// its read of each thread's stat and for its first batch (a listing of
// 1,000 threads is about a millisecond of kernel time), then once after
// each batch.
// So no TRACECLONE: it would only make the kernel stop each thread the
// seized main thread creates until the tracer resumes it, and add
// tracees; a child auto-attached all the same (CLONE_PTRACE) is adopted
// by the poll and detached like any other thread. Only listed TIDs are
// seized, so a batch never takes a thread of another process. A thread
// gone since the listing is ErrThreadExited (ErrProcessExited if the
// process is exiting); an EPERM from a thread on its way out is
// ErrThreadExited at once, not retried for milliseconds as Attach does
// while other threads wait in their stops. Every thread seized is
// Process's until released, so Detach, Tracer.Close and DetachAll detach
// whatever a batch seized and did not release (it ended early, panicked,
// or hit its deadline), on every path. A process stopped at attach (state
// T) is attached whole: each thread's group-stop report must be taken at
// its seize, for it to stay stopped. So is a process whose main thread is
// a zombie; a lazy Process refuses Freeze (ErrLazyFreeze), which needs
// every thread: attach such a dump with Attach. On a loaded 2-CPU VM
// (bench/mixthreads.c, 1,000 threads, 4 spinning), the tracer thread's
// CPU per dump fell from 39-40 to 33-34 ms (medians of 10) and the dump's
// from 81-83 to 71-80 ms; its wall time, 5-10% lower, is mostly waiting
// for threads to reach their stops.
//
// The tracer thread asks for nice -10 where the kernel allows it, and
// runs each window under SCHED_FIFO at the lowest real-time priority
// (realtime.go; DisableRealtime turns it off), so it is not preempted
// while it holds threads stopped: at nice -10 the target's own spinning
// threads still preempted it for milliseconds.
//
// # The pause
//
// A sampled thread stays stopped from its stop to the resume request (in a
// batch, Sample.Stopped counts from the last poll that found the thread
// still running: an upper bound), and
// everything on that path is kept to what the floor (bench/ptrace-floor.c)
// does: the stack buffer is allocated before the stop, the requests that
// cannot block (every ptrace request, process_vm_readv of the stack window,
// WNOHANG waits) are raw system calls that skip the Go scheduler's
// bookkeeping, SIGCHLD is blocked on the tracer thread so its handler does
// not run there right as the wait returns, a non-main thread's stop is
// waited for with a wait4 of that TID (O(1) in the kernel); a main
// thread's through a wait for any tracee (a blocking wait4 on a main
// thread can deadlock in a group exit, and polling for its stop made the
// next request wait in the kernel for the thread to leave its CPU). Exits do
// not scan every thread of the process: only when the main thread looks
// exiting (see Process.dying). BenchmarkSampleSteps times each step.
//
// Detach stops every thread first (INTERRUPT, then wait), then detaches
// each with its pending signal, so no thread is left traced or stopped by
// us and no signal is lost; it runs on every path, including after exit.
// A one-shot reader (stacktop dump) need not stop each thread twice: with
// BatchOptions.Release a batch detaches each thread at the stop of its
// sample (with its pending signal; a group-stopped thread goes back to
// its stop), and Detach is left with the threads not sampled.
//
// The one thread no wait can stop is one in an uninterruptible sleep
// (state D): the interrupt reaches it only when the sleep ends. A wait that
// may sleep first reads the thread's state; a thread in D gets a second,
// then the sample fails with ErrThreadBlocked and Detach leaves it traced
// (Tracer.leftTraced). Its stop comes when the sleep ends, and the drain
// detaches it then; if the tracer thread ends first, the kernel does.
package ptrace
