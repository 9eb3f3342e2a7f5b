//go:build linux

package ptrace

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"codeberg.org/stacktop/stacktop/regs"
)

// Batches of samples.
//
// A thread's stop comes some time after PTRACE_INTERRUPT: at once for a
// thread running on a CPU, after a wake-up and a trip onto a CPU for a
// sleeping one, after its turn in the run queue for a runnable one (which
// with more busy threads than CPUs can be many milliseconds). Sampling one
// thread after another pays each of those latencies in turn: a dump of a
// thousand sleeping threads waited for a thousand wake-ups, one by one,
// and a tick of forty spinners on two CPUs waited for forty turns.
//
// A batch instead keeps up to batchWindow threads interrupted at once and
// takes their stops as they come: it polls each thread in flight with a
// wait4 of its own TID (O(1) in the kernel, where a wait for any tracee
// walks every traced thread), and on a stop reads the registers and the
// stack window (one GETREGSET, one process_vm_readv) into a buffer of its
// own and resumes the thread at once. Once every thread of the window was
// sampled (or given up; with Overlap, once the window holds its share of
// samples, see slideBatch) the samples are handed to the caller (each),
// while the tracer thread goes on with the next window: the two overlap,
// and whatever each costs (an unwind, or the first load of a library's
// symbols, which on a loaded machine took 300 ms), no thread waits for
// it. A thread is stopped for its own sample only. Every window slot owns
// its stack buffer, allocated before any stop (per Process, two sets:
// one window's samples wait for the caller while the next fills the
// other).
//
// each runs on the caller's goroutine, not on the tracer thread: a window
// is one trip to the tracer thread, and after it the tracer thread is
// back in its loop (or in the next window). A signal sent to a thread
// while each unwinds (say, a profiling timer's, or a storm of them) is
// resumed with its signal as its SIGCHLD arrives (or at the next window's
// drains), not once each is done with the whole batch.
//
// A deadline or a cancel channel ends a batch early: a thread that has not
// stopped by then is not sampled (ErrNotTaken) and left running. Its
// interrupt stays pending; when the stop comes, a drain resumes it like
// any stop nobody waits for (the thread is no longer in flight), so no
// thread stays stopped and no later sample mistakes that stop for its own
// (any stop a sample finds is a stop of the thread as it is then).
//
// Signal-delivery-stops of threads outside the batch do not wait for its
// end: while threads are in flight a drain resumes them with their signal
// every batchDrainGap, from 50 µs for a few tracees to 2 ms for a
// thousand (stops of threads in flight are held for the batch instead).

// BatchOptions tune SampleBatch.
type BatchOptions struct {
	// StackWindow is how many bytes above each thread's stack pointer
	// are copied while it is stopped.
	StackWindow int
	// WindowAt, if not nil, sizes each thread's copy instead: called on
	// the tracer thread while the thread is stopped, with its registers
	// (SP, and the thread pointer that tells a thread stack), it returns
	// the bytes to copy above SP, at most MaxWindow. It must be quick and
	// must not block or allocate (the thread waits).
	WindowAt func(tid int, r *regs.Set) int
	// MaxWindow bounds WindowAt's answers (0: StackWindow). Slots hold
	// StackWindow bytes, and each set of slots keeps an arena of MaxWindow
	// bytes, all allocated before any stop: a thread that needs more than
	// its slot gets its copy cut from the arena during its stop, so
	// nothing is allocated while a thread waits (a 1 MiB make took 0.66
	// ms on a loaded machine). A thread the arena has no room left for in
	// its window gets its slot's size only. Memory stays at the slots plus
	// two arenas (the caller reads one window while the next is taken).
	MaxWindow int
	// Deadline, if not zero: threads not stopped by then are not sampled
	// (each gets ErrNotTaken) and left running.
	Deadline time.Time
	// Cancel, if not nil: once closed, threads not yet sampled are not
	// sampled (ErrNotTaken).
	Cancel <-chan struct{}
	// Overlap samples the next window on the tracer thread while each
	// handles the last one's samples, and slides the windows (see
	// slideBatch). It pays where the caller has a CPU of its own (dump);
	// with one P (record and top run GOMAXPROCS=1) each would compete
	// with the tracer for it while the tracer holds stopped threads.
	// Without it each runs between windows, while no thread of the batch
	// is stopped. With it each should not call the Tracer: the call waits
	// for the tracer's trip, which waits for each (up to slideWaitMax).
	Overlap bool
	// Release lets each sampled thread go with PTRACE_DETACH at the stop
	// of its sample instead of resuming it: a one-shot dump's threads are
	// then stopped once, not again to be detached at the end, and the
	// tracee list shrinks as the batch goes. A released thread is no
	// longer this Process's (Threads leaves it out; sampling it again is
	// ErrDetached), its pending signal is delivered and a group-stopped
	// thread stays stopped, as with Detach. Ignored while frozen.
	Release bool
	// OthersStill, if not nil, runs on the tracer thread after the batch
	// (after every call of each); if it reports true the batch skips its
	// final drain (a walk over every tracee in the kernel). It must only report true when no
	// thread outside the batch can have entered a stop while the batch
	// ran: a stop takes its thread off its CPU, so that thread's run time
	// is accounted at that moment.
	OthersStill func() bool
}

// ErrNotTaken: the thread did not stop before the batch's deadline (or its
// cancellation) and was left running, not sampled. Not fatal: it is busy
// and waits for a CPU, or sleeps uninterruptibly.
var ErrNotTaken = errors.New("ptrace: thread did not stop before the deadline, not sampled")

// SampleEach is SampleBatch with no deadline.
func (p *Process) SampleEach(tids []int, stackWindow int, each func(i int, s *Sample, err error) bool) error {
	return p.SampleBatch(tids, BatchOptions{StackWindow: stackWindow}, each)
}

// SampleBatch samples the threads tids, overlapping their stops (see
// "Batches of samples" above), and calls each with the index in tids of
// every thread and its sample (or error), in the order the threads
// stopped, after that thread was resumed. Every thread of tids gets
// exactly one call, unless each returns false or the process exited
// (ErrProcessExited): then the batch ends there. s is reused (copy what
// you keep). each may call the Tracer and this Process (without Overlap;
// see BatchOptions.Overlap), except for another batch of this Process
// (batches of one Process run one at a time).
//
// Without Overlap each window of threads is one trip to the tracer thread
// and each runs on the calling goroutine between windows; with Overlap
// one trip runs window after window (slideBatch) while each handles the
// samples of the windows before: whatever each costs (an unwind, a
// library's symbols loading), no thread waits for it, and a
// signal-delivery-stop of another thread is resumed with its signal, not
// after it. A call of the Tracer from each waits for the trip under way
// to end. With Release, a batch that each ends early (false, or a panic)
// has released the threads of the windows under way (with Overlap, up to
// three windows' worth) without a call for them.
func (p *Process) SampleBatch(tids []int, o BatchOptions, each func(i int, s *Sample, err error) bool) error {
	if prstatusSize == 0 {
		return ErrUnsupportedArch
	}
	p.batchMu.Lock()
	defer p.batchMu.Unlock()
	r := &batchRun{tids: tids, o: o, yielded: time.Now()}
	// Every window but the last ends with a drain: stops made meanwhile
	// sent no SIGCHLD (stopBatch). The last one's drain may be waived by
	// OthersStill, which must see every call of each: it runs after them.
	lastDrain := func() bool { return r.done && o.OthersStill != nil }
	defer func() {
		if r.done && o.OthersStill != nil {
			p.tr.do(func() {
				if !o.OthersStill() {
					p.tr.drain()
				}
			})
		}
	}()
	if o.Overlap {
		return p.slideBatch(r, lastDrain, each)
	}
	// One trip to the tracer thread per window; each runs between them,
	// while no thread of the batch is stopped or interrupted.
	var ready []readySample
	window := func() { p.tr.stopBatch(func() { ready = p.runWindow(r) }, lastDrain) }
	for {
		if err := p.tr.do(window); err != nil {
			return err
		}
		for _, x := range ready {
			if !each(x.i, x.s, x.err) || errors.Is(x.err, ErrProcessExited) {
				if !r.done && o.OthersStill != nil {
					r.done = true // its drain was not waived: OthersStill is asked all the same
				}
				return nil
			}
		}
		if r.done {
			return nil
		}
	}
}

// batchWindow bounds the threads a batch holds interrupted at once, and so
// the samples waiting for the caller. Each slot keeps a stack buffer; the
// window shrinks for large stack windows to keep them within batchBytes.
// A sliding window (Overlap) keeps slideInFlight threads interrupted and
// twice as many slots per set. Fewer in flight poll faster: each poll
// round asks every thread in flight (one wait4 each), and a 1,000-thread
// dump with 4 spinners on 2 CPUs took 67-86 ms with 8 in flight, 78-83
// with 16, 79-129 with 32 and 114-131 with 64; 16 keeps enough in flight
// for sleepers that take milliseconds to wake.
const (
	batchWindow   = 32
	slideInFlight = 16
	batchBytes    = 4 << 20
)

// startPollEvery: while a window's threads are interrupted, every this
// many interrupts all threads in flight are polled (the others poll only
// the thread just interrupted).
const startPollEvery = 4

// batchDrainGap is how often, at most, a long batch drains the events of
// threads outside it (signals to deliver, group-stops, new threads). A
// drain's wait walks every tracee in the kernel, so the gap grows with
// their number (batchDrainPerTracee each), from batchDrainMin: a small
// process's signals wait microseconds, a thousand threads' walks stay a
// small part of the batch.
const (
	batchDrainGap       = drainGap
	batchDrainMin       = 50 * time.Microsecond
	batchDrainPerTracee = 2 * time.Microsecond
)

func (t *Tracer) batchDrainGap() time.Duration {
	return min(batchDrainGap, max(batchDrainMin, time.Duration(len(t.threads))*batchDrainPerTracee))
}

// batchPollSleep is the pause between two polling rounds that found no
// stop, when the tracer may not spin (spinPolicy); fifoSpin is how long,
// under SCHED_FIFO, the tracer polls without a pause first.
const (
	batchPollSleep = 20 * time.Microsecond
	fifoSpin       = 30 * time.Microsecond
)

// multiCPU: the tracer may spin under SCHED_FIFO only where the thread it
// waits for can run on another CPU (runtime.NumCPU counts the CPUs this
// process may use).
var multiCPU = runtime.NumCPU() > 1

// stateCheckGap is how long a thread in flight may go without stopping
// before /proc is asked whether it sleeps uninterruptibly (no stop comes
// until the sleep ends) or is a main thread gone zombie (none ever comes).
const stateCheckGap = 5 * time.Millisecond

// batchState is the tracer's batch bookkeeping.
type batchState struct {
	running bool // a batch is under way (drains then do not chase signals)
	release bool // its sampled threads are detached, not resumed (Release)
	// interrupts counts the PTRACE_INTERRUPTs batches issued (tests).
	interrupts int64
	// releasedSignals counts the threads Release detached with a signal
	// to deliver (tests).
	releasedSignals int64
	// carried counts the sliding windows that handed threads in flight
	// to the next, and yields the times a slide gave its thread to the Go
	// scheduler with none in flight (slideYieldEvery) (tests).
	carried, yields int64
	// seizes counts the threads batches seized (a lazy Process's), and
	// anyPolls the poll rounds that waited for any tracee at once
	// (pollAny) (tests).
	seizes, anyPolls int64
}

// batchRun is one SampleBatch's progress across its windows.
type batchRun struct {
	tids []int
	o    BatchOptions
	next int  // the first thread of tids not started yet
	done bool // every thread was handed over
	// yielded is when the slide began or last let the Go scheduler run
	// (slideYieldEvery).
	yielded time.Time

	// With Overlap (slideBatch): windows are numbered from 1 on the
	// tracer thread; the caller counts the windows whose samples it is
	// done with (consumed), pokes freed when it counts one, and sets
	// abort when each ends the batch early.
	window   int64
	consumed atomic.Int64
	freed    chan struct{}
	abort    atomic.Bool
}

// carries reports whether the batch's windows slide (Overlap): the
// threads still in flight when a window has its samples are carried into
// the next window (see runWindow and slideBatch).
func (r *batchRun) carries() bool { return r.o.Overlap }

// nextSetFree reports whether the caller is done with the samples of the
// window before this one, whose slot set the next window reuses.
func (r *batchRun) nextSetFree() bool { return r.consumed.Load() >= r.window-1 }

// flight is a thread interrupted by the batch and not stopped yet.
type flight struct {
	i       int
	th      *thread
	t0      time.Time // interrupt issued
	seen    time.Time // last poll that found it not stopped
	checked time.Time // last /proc state check
	inD     time.Time // first seen in an uninterruptible sleep, or zero
}

// readySample is a sample (or an error) waiting to be handed to each.
type readySample struct {
	i   int
	s   *Sample // nil with err
	err error
}
