//go:build linux

package ptrace

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/regs"
)

// Quiet stops.
//
// Every ptrace-stop sends the tracer's process a SIGCHLD. For the stops a
// batch of samples causes itself that signal is pure cost, and a large
// one: the kernel wakes one of the program's threads to run Go's signal
// handler, which wakes the os/signal goroutine, which wakes the tracer
// goroutine, all while the sampled thread waits for its resume. Measured
// on a 2-core VM at 999 Hz, a sample took 120-145 µs from
// PTRACE_INTERRUPT to the resume with the signal, 78-84 µs with SIGCHLD
// ignored (stacktop record on bench/gaploop.c).
//
// SA_NOCLDSTOP on the SIGCHLD action stops the kernel from sending the
// signal for stops (of children and tracees alike); exits still send it,
// and waiting is unaffected. A batch sets the flag on Go's own handler for
// its duration, then clears it and drains: a stop some other thread of the
// target made meanwhile (a signal to deliver, a new thread) is found by
// that drain, and any later one signals again. (A caller that can prove no
// other thread ran meanwhile may waive the drain: see
// BatchOptions.OthersStill.)
// Nothing else changes: the
// handler stays Go's, and no child is reaped behind os/exec's back (which
// ignoring SIGCHLD would do).

// quiet counts the batches under way in the whole program: the action is
// process-wide, so with several Tracers the flag is cleared by the last
// batch to end. A stop another Tracer's tracee makes while only the first
// Tracer's batch ran is then found by that Tracer's next drain (its
// safetyPoll at the latest).
var quiet struct {
	mu  sync.Mutex
	n   int
	set bool // whether we set SA_NOCLDSTOP (it was clear before)
}

// stopBatch runs fn, a batch of stops (samples, a freeze, a detach): with
// stop notifications off, and with spinning decided for the batch. It
// drains at the end, unless othersStill (if not nil) reports, once stop
// notifications are back on, that no other tracee can have stopped.
func (t *Tracer) stopBatch(fn func(), othersStill func() bool) {
	t.spin = t.spinner.allowed()
	quiet.mu.Lock()
	if quiet.n++; quiet.n == 1 {
		quiet.set = setNoCLDStop(true)
	}
	quiet.mu.Unlock()
	defer func() {
		quiet.mu.Lock()
		if quiet.n--; quiet.n == 0 && quiet.set {
			setNoCLDStop(false)
			quiet.set = false
		}
		quiet.mu.Unlock()
		if othersStill == nil || !othersStill() {
			t.drain()
		}
	}()
	fn()
}

// sigaction is the kernel's struct sigaction for rt_sigaction on the
// 64-bit architectures stacktop supports (amd64, arm64 and s390x all have
// sa_restorer): handler, flags, restorer, mask.
type sigaction struct {
	handler, flags, restorer, mask uint64
}

const saNoCLDStop = 1 // SA_NOCLDSTOP, the same on every architecture here

// setNoCLDStop sets or clears SA_NOCLDSTOP on the current SIGCHLD action
// and reports whether it changed anything. It leaves SIG_DFL and SIG_IGN
// alone: then no SIGCHLD is sent for a stop anyway.
func setNoCLDStop(on bool) bool {
	var act sigaction
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), 0,
		uintptr(unsafe.Pointer(&act)), unsafe.Sizeof(act.mask), 0, 0); e != 0 {
		return false
	}
	if act.handler <= 1 || (act.flags&saNoCLDStop != 0) == on {
		return false
	}
	act.flags ^= saNoCLDStop
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD),
		uintptr(unsafe.Pointer(&act)), 0, unsafe.Sizeof(act.mask), 0, 0)
	return e == 0
}

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

// A slide is SampleBatch with Overlap: the tracer thread runs window
// after window in one trip, and hands each window's samples to the
// caller through a channel while it goes on with the next; each walks
// them meanwhile. The windows slide (runWindow carries the threads still
// in flight into the next window), so the tracer never waits for a
// window's slowest thread before it interrupts more. Two slot sets
// alternate: the tracer starts a window only once the caller is done
// with the window before the last (whose set it reuses), and waits for
// that with no thread held (a window that cannot carry its flights ends
// when they stopped). The caller's progress reaches the tracer without
// a round trip through the Go scheduler: a carried thread stays stopped
// (or interrupted) only while the tracer itself works.
type slideDelivery struct {
	ready []readySample
	w     int64 // window number
	end   bool  // the trip ended: no delivery follows
}

// slideYieldEvery is how long a slide runs on before it lets the Go
// scheduler have its goroutine, at a window that carried no thread: once
// the yield is due, the window starts no more threads and ends when those
// in flight stopped and were sampled. A goroutine that runs 10 ms without
// a scheduling point is preempted by Go's sysmon, wherever it is: a
// slide's tracer was, in the middle of windows, with up to 16 threads
// stopped, and got its thread back only once another of the program's
// threads got a CPU to hand it over, which under 4 spinning threads on 2
// CPUs took 2-9 ms (runtime and kernel traces of 1,000-thread dumps: 1 to
// 3 dumps in 100 held a thread stopped that long). Yielding where no
// thread waits moves that wait to where it stops nothing. (A window whose
// last threads are slow to stop can still run past sysmon's 10 ms.)
var slideYieldEvery = 6 * time.Millisecond // (a variable for tests)

// yieldDue reports whether a slide should end its window without carrying
// threads in flight, and then yield.
func (r *batchRun) yieldDue(now time.Time) bool {
	return r.carries() && now.Sub(r.yielded) >= slideYieldEvery
}

// slideWaitMax bounds the tracer's wait for the caller within one trip:
// past it the trip ends and the caller starts another. Only an each that
// calls the Tracer (which it must not, with Overlap) waits that long.
const slideWaitMax = 50 * time.Millisecond

func (p *Process) slideBatch(r *batchRun, lastDrain func() bool, each func(i int, s *Sample, err error) bool) error {
	r.freed = make(chan struct{}, 1)
	// At most two windows wait for the caller (the tracer starts window
	// w+1 only once w-1 was consumed), then the trip's end.
	deliveries := make(chan slideDelivery, 4)
	trip := func() {
		p.tr.stopBatch(func() {
			defer func() {
				p.dropFlights() // aborted, or ended while carrying
				deliveries <- slideDelivery{end: true}
			}()
			p.slide(r, deliveries)
		}, lastDrain)
	}
	wait, err := p.tr.submit(trip)
	if err != nil {
		return err
	}
	// ended collects the trip's end; a panic on the tracer thread is
	// raised here, once.
	ended := func() error {
		w := wait
		wait = nil
		return w()
	}
	finish := func() error {
		// Ends the trip under way (if any): the tracer stops starting
		// threads, lets go of those in flight, and says so.
		if wait == nil {
			return nil
		}
		r.abort.Store(true)
		r.poke()
		for d := range deliveries {
			if d.end {
				break
			}
		}
		return ended()
	}
	defer finish() // each panicked
	for {
		d := <-deliveries
		if d.end {
			if err := ended(); err != nil || r.done {
				return err
			}
			// The tracer waited too long for us: another trip.
			if wait, err = p.tr.submit(trip); err != nil {
				return err
			}
			continue
		}
		for _, x := range d.ready {
			if !each(x.i, x.s, x.err) || errors.Is(x.err, ErrProcessExited) {
				err := finish()
				if !r.done && r.o.OthersStill != nil {
					r.done = true // its drain was not waived: OthersStill is asked all the same
				}
				return err
			}
		}
		r.consumed.Store(d.w)
		r.poke()
	}
}

// poke tells a tracer waiting in slide that the caller got on.
func (r *batchRun) poke() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// slide runs one trip of a slide on the tracer thread: windows until the
// batch is done, aborted, or the caller lags for slideWaitMax. The trip
// runs under SCHED_FIFO (where allowed) from window to window, carried
// threads included, and at its normal policy while it waits for the
// caller, when no thread is held.
func (p *Process) slide(r *batchRun, deliveries chan<- slideDelivery) {
	t := p.tr
	rt := t.enterRealtime()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if rt {
			t.leaveRealtime()
		}
	}()
	for {
		r.window++
		ready := p.runWindow(r)
		deliveries <- slideDelivery{ready: ready, w: r.window}
		if r.done || r.abort.Load() {
			return
		}
		if len(p.flights) == 0 && !p.frozen && r.yieldDue(time.Now()) {
			// No thread stopped or about to stop: the Go scheduler may
			// take this goroutine off its thread now (see
			// slideYieldEvery) rather than in the middle of a window.
			runtime.Gosched()
			r.yielded = time.Now()
			t.batch.yields++
			t.drain() // stops of threads outside the batch that came meanwhile
		}
		// The next window reuses the slots of the window before this
		// one. (runWindow carried threads only if they were free.)
		if r.nextSetFree() {
			continue
		}
		if len(p.flights) > 0 {
			panic("ptrace: a window carried its threads in flight into slots the caller reads")
		}
		if rt {
			t.leaveRealtime()
			rt = false
		}
		waitFrom := time.Now()
		for !r.nextSetFree() && !r.abort.Load() {
			if time.Since(waitFrom) > slideWaitMax {
				return
			}
			if timer == nil {
				timer = time.NewTimer(t.batchDrainGap())
			} else {
				timer.Reset(t.batchDrainGap())
			}
			select {
			case <-r.freed:
			case <-timer.C:
				t.drain() // signals to deliver wait for no window
			}
		}
		if r.abort.Load() {
			return
		}
		r.yielded = time.Now() // (waiting was a scheduling point)
		rt = t.enterRealtime()
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

// batchSlots is one Process's batch storage, reused across batches.
type batchSlots struct {
	slots []*Sample
	bufs  [][]byte // each slot's own stack buffer
	free  []*Sample
	ready []readySample
	// windowAt and maxWindow are the running batch's
	// BatchOptions.WindowAt and its bound; arena[:arenaUsed] holds the
	// copies of this window's threads that needed more than their slot.
	windowAt  func(tid int, r *regs.Set) int
	maxWindow int
	arena     []byte
	arenaUsed int
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

// runWindow interrupts the next window of r's threads at once, samples
// and resumes each as it stops, and returns the window's samples (in
// p.batch's slots, valid until the next window).
//
// Without Overlap a window ends once no thread of it is in flight: the
// caller's each then runs while no thread of the batch is stopped or
// interrupted. With Overlap the window slides: whenever a thread of it
// was sampled, the next thread of the batch is interrupted, so that up to
// window threads are always on their way to a stop, and the window ends
// as soon as it holds window samples; the threads still in flight are
// carried into the next window, which the caller starts at once. A
// window that waits for its slowest thread (a sleeper woken behind busy
// threads on a contended CPU: milliseconds) leaves the tracer idle while
// the rest of the batch waits; sliding keeps every slot at work. Each
// slot set then holds twice the window (carried threads stop into the
// next set).
func (p *Process) runWindow(r *batchRun) []readySample {
	t := p.tr
	p.batch, p.spare = p.spare, p.batch // the caller may still read the last window's
	b := &p.batch
	tids, o := r.tids, r.o
	n := max(o.StackWindow, 0)
	window, slots := batchWindow, batchWindow
	if r.carries() {
		window, slots = slideInFlight, 2*slideInFlight
	}
	if n > 0 {
		slots = min(slots, max(batchBytes/n, 1))
		window = min(window, slots)
	}
	slots = min(slots, max(len(tids)-r.next+len(p.flights), 1))
	b.prepare(slots, n, o)
	if r.carries() && r.window == 1 && len(tids) > slots {
		// Threads in flight stop into the next window's slots: they
		// must be there before any stop, like this window's. (Only now:
		// later, the caller reads the other set's samples. Slots never
		// grow within a batch.)
		p.spare.prepare(slots, n, o)
	}
	b.free = append(b.free[:0], b.slots[:slots]...)
	b.ready = b.ready[:0]
	b.arenaUsed = 0
	t.batch.running, t.batch.release = true, o.Release
	rt := t.enterRealtime()
	carried := false
	defer func() {
		if rt {
			t.leaveRealtime()
		}
		t.batch.running, t.batch.release = false, false
		if !carried {
			// Whatever ended the window, no thread stays held for it: a
			// stop still to come is resumed by a drain.
			p.dropFlights()
		}
		r.done = r.next >= len(tids) && len(p.flights) == 0
	}()
	// canStart: a slot for every thread in flight and every sample taken.
	canStart := func() bool {
		if r.carries() {
			if len(b.ready) > 0 && r.yieldDue(time.Now()) {
				return false // the window only lets its flights stop: a yield follows
			}
			return len(p.flights) < window && len(p.flights)+len(b.ready) < slots
		}
		return len(p.flights)+len(b.ready) < window
	}
	start := func() {
		// Never past the deadline or after Cancel: an interrupt then
		// stops a thread for a sample that is not taken, and its pause
		// goes uncounted; the expiry below reports the rest not taken.
		started := 0
		for r.next < len(tids) && canStart() && !p.expired(r, time.Now()) {
			i := r.next
			r.next++
			if x, ok := p.startSample(i, tids[i], n); ok {
				b.ready = append(b.ready, x)
				continue
			}
			// A sleeping thread woken by the interrupt on this CPU runs
			// first and is often stopped by now: take it at once, not
			// once the rest of the window was interrupted (which held it
			// stopped for that long, a few hundred µs). Threads woken on
			// another CPU stop there meanwhile: every few interrupts,
			// all are polled.
			switch started++; {
			case p.anyWait():
				p.pollAny(n) // one wait answers for every flight
			case started%startPollEvery == 0:
				p.pollFlights(n)
			default:
				p.pollFlight(len(p.flights)-1, n)
			}
		}
	}
	start()
	lastDrain := time.Now()
	lastEach := lastDrain
	gap := t.batchDrainGap()
	idle := 0
	var idleFrom time.Time
	for {
		found, drained := p.poll(n)
		if drained {
			// A round of pollAny handled every tracee's events: no drain
			// is due. (Every stateCheckGap each flight is still asked on
			// its own, in case a thread left the tracee list without a
			// status: cheap, and pollOne's ECHILD then tells.)
			if lastDrain = time.Now(); lastDrain.Sub(lastEach) >= stateCheckGap {
				lastEach = lastDrain
				found = p.pollFlights(n) || found
			}
		}
		if r.carries() && len(b.ready) >= window && len(p.flights) > 0 && r.nextSetFree() && !r.yieldDue(time.Now()) {
			// The next window follows at once, on this thread: the
			// threads in flight stop into it. (While the caller still
			// reads the samples of the window before, whose slots the
			// next one reuses, this window takes no new threads once
			// its slots are spoken for, and ends when its flights did:
			// no thread is held while the tracer waits for the caller.)
			carried = true
			t.batch.carried++
			return b.ready
		}
		if found {
			idle = 0
			if start(); len(p.flights) > 0 {
				continue
			}
		}
		if len(p.flights) == 0 {
			if start(); len(p.flights) > 0 {
				continue
			}
			if len(b.ready) == 0 && r.next < len(tids) {
				// Nothing started (the deadline passed): the rest is
				// not taken.
				for ; r.next < len(tids); r.next++ {
					b.ready = append(b.ready, readySample{i: r.next, err: ErrNotTaken})
				}
			}
			return b.ready
		}
		now := time.Now()
		if p.expired(r, now) {
			// Take what stopped meanwhile; what is still in flight is not
			// taken: it stays interrupted but runs on, and so does every
			// thread not started.
			p.poll(n)
			for _, f := range p.flights {
				f.th.inFlight = false
				if f.th.state == stateHeld && !p.frozen { // stopped since the last poll
					p.resume(f.th)
				}
				b.ready = append(b.ready, readySample{i: f.i, err: ErrNotTaken})
			}
			p.flights = p.flights[:0]
			for ; r.next < len(tids); r.next++ {
				b.ready = append(b.ready, readySample{i: r.next, err: ErrNotTaken})
			}
			return b.ready
		}
		if now.Sub(lastDrain) >= gap {
			t.drain()
			lastDrain = now
			continue
		}
		p.checkFlights(now)
		if idle == 0 {
			idleFrom = now
		}
		idle++
		switch {
		case t.realtime && !t.realtimeDenied && multiCPU && !r.carries() && now.Sub(idleFrom) < fifoSpin:
			// Poll on for a moment: a thread running on another CPU
			// stops within microseconds of its interrupt, and a sleep
			// costs this VM tens of µs to wake from (a quiet machine's
			// record paused each thread 64 µs instead of 20). No yield:
			// under SCHED_FIFO it lets no ordinary thread run, the
			// thread to stop included; the bound is what a thread woken
			// on this CPU waits at most for it. Not in a dump's slide:
			// most of its threads sleep, and each must run, most often
			// on whichever CPU is free, to reach its stop (spinning
			// there, a 1,000-thread dump took 114 ms instead of 91).
		case t.spin && !t.realtime && idle < 64:
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		default:
			// Raw: through the Go scheduler, a sleep longer than sysmon's
			// 20 µs hands this thread's P to another goroutine, and with
			// one P (record, top) the tracer then waits for it after
			// every sleep while threads it stopped wait for the tracer:
			// with line tables loading in the background, ticks took
			// 0.6 s and a thread stayed stopped 1.4 s.
			ts := unix.NsecToTimespec(int64(batchPollSleep))
			unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		}
	}
}

// dropFlights gives up the threads in flight, on the tracer thread: a
// batch that ends early (each returned false, a panic, the deadline)
// leaves none held. One already stopped is resumed (unless frozen); one
// whose stop is still to come is resumed by a drain, like any stop
// nobody waits for.
func (p *Process) dropFlights() {
	for _, f := range p.flights {
		f.th.inFlight = false
		if f.th.state == stateHeld && !p.frozen {
			p.resume(f.th)
		}
	}
	p.flights = p.flights[:0]
}

func (p *Process) expired(r *batchRun, now time.Time) bool {
	o := r.o
	if r.abort.Load() {
		return true
	}
	if !o.Deadline.IsZero() && !now.Before(o.Deadline) {
		return true
	}
	if o.Cancel != nil {
		select {
		case <-o.Cancel:
			return true
		default:
		}
	}
	return false
}

// startSample begins the sample of thread tid (index i): an error or a
// sample at once (ok), or an interrupt and a flight.
func (p *Process) startSample(i, tid, window int) (r readySample, ok bool) {
	b := &p.batch
	if err := p.usable(); err != nil {
		return readySample{i: i, err: err}, true
	}
	th := p.threads[tid]
	if th == nil && p.lazy && !p.released[tid] {
		// Lazy: seized here, right before its interrupt (a thread that
		// was released is not seized again: ErrDetached, as without).
		var err error
		if th, err = p.seizeLazy(tid); err != nil {
			return readySample{i: i, err: err}, true
		}
	}
	if th == nil || (tid == p.pid && p.leaderZombie) {
		return readySample{i: i, err: p.notTraced(tid)}, true
	}
	now := time.Now()
	if th.state == stateHeld {
		// Stopped already (frozen, or a stop we hold): no interrupt.
		s := b.take()
		err := p.read(th, s, window, 0, b)
		p.letGo(th)
		d := time.Since(now)
		s.Stopped, s.Total = d, d
		if err != nil {
			b.free = append(b.free, s)
			s = nil
		}
		return readySample{i: i, s: s, err: err}, true
	}
	if th.blocked {
		// Found in an uninterruptible sleep by an earlier wait: its
		// interrupt is pending. Still asleep, it answers at once.
		if st, err := procmaps.ReadThreadState(p.pid, tid); err == nil && st == 'D' {
			return readySample{i: i, err: fmt.Errorf("thread %d: %w", tid, ErrThreadBlocked)}, true
		}
		th.blocked = false
	}
	if th.state == stateRunning || th.state == stateListening {
		// ESRCH means the thread is gone: the poll collects its exit.
		ptraceReq(unix.PTRACE_INTERRUPT, tid, 0, 0)
		p.tr.batch.interrupts++
	}
	th.inFlight = true
	p.flights = append(p.flights, flight{i: i, th: th, t0: now, seen: now, checked: now})
	return readySample{}, false
}

// letGo ends the stop of a sampled thread: nothing while frozen, a
// release in a Release batch, else a resume.
func (p *Process) letGo(th *thread) {
	switch {
	case p.frozen:
	case p.tr.batch.release:
		p.release(th)
	default:
		p.resume(th)
	}
}

// prepare allocates what a window of the given slots needs (their stack
// buffers of n bytes, and the arena for WindowAt), before any stop.
func (b *batchSlots) prepare(slots, n int, o BatchOptions) {
	for len(b.slots) < slots {
		b.slots = append(b.slots, &Sample{})
		b.bufs = append(b.bufs, nil)
	}
	for i, s := range b.slots[:slots] {
		if cap(b.bufs[i]) != n {
			b.bufs[i] = touched(make([]byte, n))
		}
		s.Stack = b.bufs[i] // a copy cut from the arena is given back here
	}
	b.windowAt, b.maxWindow = o.WindowAt, max(o.MaxWindow, n)
	if b.windowAt != nil && len(b.arena) < b.maxWindow {
		// Not touched: only a copy larger than its slot (a main
		// thread's deep stack) is cut from it, and touching a MiB
		// costs a 1-thread dump a millisecond.
		b.arena = make([]byte, b.maxWindow)
	}
	if cap(b.ready) < slots { // (nothing grows during stops)
		b.ready = make([]readySample, 0, slots)
	}
	if cap(b.free) < slots {
		b.free = make([]*Sample, 0, slots)
	}
}

// touched writes to every page of buf and returns it (the slots' buffers,
// which every sample writes to). Memory fresh from
// the kernel is mapped at its first write: process_vm_readv copying into
// such a page faults in the tracer's own address space, and the fault
// waits for its mmap lock, which the Go runtime holds while it maps more
// heap for another goroutine. A dump's thread waited so, stopped, for
// 1-3 ms (kernel stacks: copy_page_to_iter, exc_page_fault,
// rwsem_down_read_slowpath); buffers touched before any stop do not
// fault.
func touched(buf []byte) []byte {
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 0
	}
	return buf
}

func (b *batchSlots) take() *Sample {
	s := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	return s
}

// pollFlights looks once at every thread in flight: a stopped one is
// sampled and resumed, an exited one reported. It reports whether any
// thread stopped or exited.
func (p *Process) pollFlights(window int) (found bool) {
	for j := 0; j < len(p.flights); {
		if p.pollFlight(j, window) {
			found = true
			continue
		}
		j++
	}
	return found
}

// pollFlight looks once at the thread in flight j; if it stopped (it is
// sampled and resumed) or exited, it reports true and the last flight
// takes place j.
func (p *Process) pollFlight(j, window int) bool {
	r, done := p.pollOne(&p.flights[j], window)
	if done {
		p.land(j, r)
	}
	return done
}

// land ends the flight j with r: r waits for the caller, and the last
// flight takes place j.
func (p *Process) land(j int, r readySample) {
	p.flights[j].th.inFlight = false
	p.batch.ready = append(p.batch.ready, r)
	last := len(p.flights) - 1
	p.flights[j] = p.flights[last]
	p.flights = p.flights[:last]
}

// pollOne checks one thread in flight without blocking.
func (p *Process) pollOne(f *flight, window int) (readySample, bool) {
	th := f.th
	if p.tr.threads[th.tid] != th {
		return readySample{i: f.i, err: ErrThreadExited}, true // dropped by an exec in another thread
	}
	if th.state != stateHeld {
		before := time.Now()
		wpid, ws, err := wait4NoHang(th.tid)
		switch {
		case err == unix.ECHILD:
			return readySample{i: f.i, err: p.gone(th)}, true
		case err != nil || wpid != th.tid:
			f.seen = before
			return readySample{}, false
		}
		return p.flightStatus(f, ws, before, window)
	}
	return p.takeSample(f, window), true
}

// flightStatus applies the wait status ws of the thread in flight f,
// which a poll begun at before collected: a stop is sampled (done); an
// exit is its error (done).
func (p *Process) flightStatus(f *flight, ws unix.WaitStatus, before time.Time, window int) (readySample, bool) {
	held, err := p.onStatus(f.th, ws, true)
	if err != nil {
		return readySample{i: f.i, err: err}, true
	}
	if !held {
		f.seen = before
		return readySample{}, false
	}
	return p.takeSample(f, window), true
}

// takeSample samples the held thread of flight f and lets it go.
func (p *Process) takeSample(f *flight, window int) readySample {
	th := f.th
	s := p.batch.take()
	err := p.read(th, s, window, 0, &p.batch)
	p.letGo(th)
	now := time.Now()
	// The stop came after the last poll that found none: from there to
	// the resume is an upper bound of the time the thread stood still.
	s.Stopped, s.Total = now.Sub(f.seen), now.Sub(f.t0)
	if err != nil {
		p.batch.free = append(p.batch.free, s)
		s = nil
	}
	return readySample{i: f.i, s: s, err: err}
}

// Polling a small tracee set.
//
// pollFlights asks each thread in flight with a wait4 of its TID: a wait
// for any tracee walks every tracee of the tracer thread in the kernel,
// 9-11 µs with a thousand. A lazy Process (AttachLazy) has no thousand:
// its tracees are the main thread and the threads in flight, each
// released at its sample. There one wait for any tracee (pollAny) answers
// for every flight at once, where most per-flight polls found nothing
// (about 12 of every 16 in a 1,000-thread dump).

// anyWaitMax is the most tracees (of the whole tracer thread) for which
// a poll round waits for any tracee (pollAny) instead of each flight's.
const anyWaitMax = 4 * slideInFlight

// anyWait reports whether this poll round may use pollAny.
func (p *Process) anyWait() bool {
	return p.lazy && len(p.tr.threads)+len(p.tr.leftTraced) <= anyWaitMax
}

// poll is one poll round over the threads in flight: pollAny where the
// tracee set is small (anyWait), else pollFlights. drained reports that
// every pending event of the tracer's tracees was handled, as a drain
// would.
func (p *Process) poll(window int) (found, drained bool) {
	if p.anyWait() {
		return p.pollAny(window)
	}
	return p.pollFlights(window), false
}

// pollAny is a poll round of one wait for any tracee: it consumes every
// pending event of the tracer thread's tracees (t.next, which never
// consumes a child's exit), samples each thread in flight that
// stopped, and hands every other event to dispatch, exactly as a drain
// would (the main thread's group-stop, a signal to deliver, an exit, an
// auto-attached thread). A flight that can answer without a wait (held
// by an earlier drain, or dropped by an exec) is answered as pollOne
// would. With a child's event pending it falls back to pollFlights.
func (p *Process) pollAny(window int) (found, drained bool) {
	t := p.tr
	t.batch.anyPolls++
	before := time.Now()
	for k := 0; k < anyWaitMax; k++ {
		wpid, ws, stray := t.next(unix.WNOHANG)
		if stray {
			return p.pollFlights(window) || found, false
		}
		if wpid <= 0 {
			break
		}
		j := p.flightOf(wpid)
		if j < 0 {
			t.dispatch(wpid, ws)
			continue
		}
		if r, done := p.flightStatus(&p.flights[j], ws, before, window); done {
			p.land(j, r)
			found = true
		}
	}
	for j := 0; j < len(p.flights); {
		f := &p.flights[j]
		if t.threads[f.th.tid] == f.th && f.th.state != stateHeld {
			f.seen = before
			j++
			continue
		}
		r, _ := p.pollOne(f, window) // no wait: it answers at once
		p.land(j, r)
		found = true
	}
	return found, true
}

// flightOf returns the index of the flight of thread tid, or -1.
func (p *Process) flightOf(tid int) int {
	for j := range p.flights {
		if p.flights[j].th.tid == tid {
			return j
		}
	}
	return -1
}

// checkFlights asks /proc about threads in flight that have not stopped
// for a while: one in an uninterruptible sleep for blockedGrace is given
// up (ErrThreadBlocked, as waitUninterruptible does), a main thread gone
// zombie (it called pthread_exit) never stops and has exited.
func (p *Process) checkFlights(now time.Time) {
	b := &p.batch
	for j := 0; j < len(p.flights); {
		f := &p.flights[j]
		if now.Sub(f.checked) < stateCheckGap {
			j++
			continue
		}
		f.checked = now
		st, err := procmaps.ReadThreadState(p.pid, f.th.tid)
		var r readySample
		switch {
		case err != nil:
			j++
			continue // the poll finds its exit
		case st == 'Z' || st == 'X':
			if f.th.tid != p.pid {
				j++
				continue // its exit is reported to us
			}
			p.leaderZombie = true
			p.forget(f.th)
			r = readySample{i: f.i, err: ErrThreadExited}
		case st == 'D':
			if f.inD.IsZero() {
				f.inD = now
			}
			if now.Sub(f.inD) < blockedGrace {
				j++
				continue
			}
			f.th.blocked = true
			r = readySample{i: f.i, err: fmt.Errorf("thread %d: %w", f.th.tid, ErrThreadBlocked)}
		default:
			f.inD = time.Time{}
			j++
			continue
		}
		f.th.inFlight = false
		b.ready = append(b.ready, r)
		last := len(p.flights) - 1
		p.flights[j] = p.flights[last]
		p.flights = p.flights[:last]
	}
}
