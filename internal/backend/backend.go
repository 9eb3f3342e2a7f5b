// Package backend is the seam between the ways stacktop obtains a thread's
// machine state and everything above them.
//
// A back end yields, per thread sample, the thread's registers and a copy of
// the top of its stack, and says when and which thread. Two back ends exist:
//   - ptrace stops each thread for a few microseconds (PTRACE_INTERRUPT),
//     reads its registers and copies its stack with process_vm_readv; it
//     decides itself which threads to sample at each tick (threads that did
//     not run are skipped or, for wall-clock profiles, reported Unchanged);
//   - perf_event lets the kernel copy registers and stack at a timer
//     interrupt into a ring buffer; no thread is stopped.
//
// Everything above the seam (unwinding with SFrame, CFI, frame pointers or
// the back chain, naming frames, aggregating into a profile) sees only
// Samples, so it is the same for both and for a test double that replays
// captured samples. Adding a back end means one new package that implements
// Source and one case in the command line's --backend switch.
//
// Lifecycle: a back end's constructor attaches to (or opens events on) one
// process; the caller then calls Next until it returns an error or its
// context ends, and Close exactly once, on every path: Close must leave the
// target as it was found (no thread stopped, traced or slowed).
package backend

import (
	"context"
	"errors"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/regs"
)

// ErrExited is returned by Source.Next once the sampled process is gone.
// Samples yielded in the same call are valid.
var ErrExited = errors.New("process exited")

// A Sample is one thread's state at one moment.
//
// A yielded Sample and the bytes of its Stack belong to the Source: they are
// valid only until the yield function returns, so the consumer unwinds (or
// copies) before returning. This lets a back end reuse one buffer for every
// sample and resume a stopped thread before the next one is unwound.
type Sample struct {
	TID  int
	Time time.Time // when the state was taken

	// Regs are the thread's user registers. Regs.Arch is the target's
	// architecture, which need not be the host's (captured snapshots).
	Regs regs.Set
	// Stack is a copy of the thread's memory from StackAddr (the stack
	// pointer at the sample) up, as much as the back end's window holds;
	// shorter if it reached unmapped memory.
	StackAddr uint64
	Stack     []byte

	// Weight is the CPU time the sample stands for in an on-CPU profile:
	// the time since the previous tick, for a thread found running at
	// the tick (ptrace), or the sampling event's period (perf). 0 means
	// one sampling period.
	Weight time.Duration

	// LateStop reports that the stop landed at the exit of a system call
	// the thread most likely entered after it was asked to stop (a stop
	// lands at a thread's next kernel entry, and a thread that makes a
	// call every 100 µs is caught at exits far more often than it is in
	// the kernel: ptracesampler's weight.go). The resolver counts the
	// sample at the caller of the call's wrapper, where the thread was.
	LateStop bool

	// Pause is how long the thread was stopped to take the sample (stop
	// reported -> resume request returned); Total counts from the stop
	// request. Both are 0 for a back end that does not stop threads.
	Pause, Total time.Duration

	// State is the thread's state at the sample under wall-clock sampling
	// (running, or what it waits in); StateUnknown elsewhere.
	State profile.ThreadState

	// Unchanged reports that the thread has not run since its previous
	// sample: Regs and Stack are empty and its previous stack stands
	// again. Only wall-clock sampling (Options.Idle of a back end that
	// knows per-thread run times) yields it.
	Unchanged bool

	// MapsChanged reports that the process mapped executable memory (a
	// dlopen()ed library, JIT code) or replaced its program since the
	// previous sample this Source yielded: a resolver that caches the
	// module list reads /proc/PID/maps again before unwinding this one.
	// Set by back ends that learn of mappings as they happen (perf:
	// PERF_RECORD_MMAP2); others leave it false.
	MapsChanged bool

	// StackUse is written by the consumer while it unwinds the sample
	// (during yield, resolve.Resolver.Walk): what the walk read of the
	// thread's stack. A back end that sizes its stack copies per thread
	// (ptrace) reads it once yield returns; others ignore it.
	StackUse StackUse
}

// StackUse is what a walk needed of its sample's stack: the stack mapping
// above StackAddr.
type StackUse struct {
	// End is the end of the walk's highest read of the stack (0: none, or
	// the stack mapping is not known): a copy up to End holds every read.
	End uint64
	// Missed counts the walk's reads of the stack that Stack did not
	// hold. They were served from the live process, after the thread
	// was resumed: frames the thread has left since may be wrong.
	Missed int
}

// Round is what one call of Source.Next did, besides its samples: the
// counters a summary or the terminal UI reports, so a user sees why a
// profile holds fewer samples than asked.
type Round struct {
	// Exec reports that the process replaced its program (execve): every
	// address-space snapshot, module and stack of before is stale. A round
	// ends at an exec, so its samples are all of the old program (those
	// taken before the exec) and the next round's all of the new one:
	// consumers resolve samples as they are yielded and reload after the
	// round.
	Exec bool
	// Threads is the number of threads of the process now.
	Threads int

	Ticks    int64 // sampling ticks this round covers (ptrace: 1; perf: 0)
	Missed   int64 // ticks skipped because sampling overran the period
	Failed   int64 // thread samples that failed
	Gone     int64 // thread samples not taken because the thread exited
	NotTaken int64 // threads that did not stop before the tick's deadline
	// Asleep counts on-CPU samples dropped because the stop found the
	// thread asleep in a system call: it was running when the tick read
	// its state, and went to sleep before it stopped.
	Asleep int64
	// LateStops counts on-CPU samples yielded LateStop.
	LateStops int64
	Lost      int64 // samples the kernel dropped (perf: PERF_RECORD_LOST)
	Err       error // the last per-thread failure, if any

	// CPU is the CPU time the process used during this round, where the
	// back end reads the process's CPU clock (ptrace, sampling every
	// thread); 0 elsewhere. It lets a summary set an on-CPU total beside
	// the truth.
	CPU time.Duration

	// Work is how long the back end worked on this round, waiting for it
	// excluded (ptrace: the tick's scan, stops and the consumer's unwinds
	// inside yield). Summaries show it beside missed ticks: a tick that
	// works longer than a period makes the next one late.
	Work time.Duration
}

// A Source yields the samples of one process.
type Source interface {
	// Next waits for the next round of samples and calls yield for each,
	// in the order they were taken. A round is a tick for a back end that
	// paces itself (ptrace) or what the kernel wrote since the previous
	// call (perf). Next returns ctx.Err() once ctx is done, ErrExited once
	// the process is gone, or another error that ends sampling.
	Next(ctx context.Context, yield func(*Sample)) (Round, error)

	// Close stops sampling and releases the process. It is safe to call
	// more than once.
	Close() error
}
