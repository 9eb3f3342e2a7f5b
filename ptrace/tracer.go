//go:build linux

package ptrace

import (
	"os"
	"os/signal"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// Tracer owns one OS thread, the only one that issues ptrace requests and
// waits for tracees: the kernel binds a tracee to the tracer thread, not the
// process. Every method hands a closure to that thread and waits for it, so
// all Tracer and Process methods are safe for concurrent use.
type Tracer struct {
	reqs      chan request
	quit      chan struct{} // closed by Close
	done      chan struct{} // closed when the tracer goroutine returned
	closeOnce sync.Once

	// Owned by the tracer goroutine.
	tid     int              // the tracer thread; what tracees show as TracerPid
	procs   map[int]*Process // by PID
	threads map[int]*thread  // by TID, every process
	// leftTraced holds the threads Detach could not stop (uninterruptible
	// sleep): still traced, claimed by no Process, detached by dispatch
	// at their stop.
	leftTraced map[int]struct{}
	raw        prstatus // NT_PRSTATUS buffer
	rawIov     unix.Iovec
	fpRaw      [fpregsMaxSize]byte // NT_PRFPREG buffer (s390x)
	local      [1]unix.Iovec
	remote     [1]unix.RemoteIovec
	batch      batchState // SampleBatch's buffers, reused across batches
	spinner    *spinPolicy
	spin       bool // this batch's waits for a stop poll first (spinPolicy)
	// realtime: the tracer thread is under SCHED_FIFO now;
	// realtimeDenied: the kernel refused it (see realtime.go);
	// realtimeWindows counts the times it entered it (tests).
	realtime        bool
	realtimeDenied  bool
	realtimeWindows int64

	// signalStops counts signal-delivery-stops resumed outside a sample
	// (by a drain): the loop then handles the next SIGCHLD at once.
	signalStops int64

	// strays: this thread may have a child that is not a tracee, whose
	// exit a wait for any tracee could take from its owner, so next
	// peeks before it consumes. False when the thread is not the
	// process's main thread and had no child when the tracer took it
	// (see loop): it then never has one.
	strays bool
}

type request struct {
	fn    func()
	reply chan any // nil, or a recovered panic value
}

var replyPool = sync.Pool{New: func() any { return make(chan any, 1) }}

// NewTracer starts the tracer thread.
func NewTracer() *Tracer {
	t := newTracer()
	started := make(chan struct{})
	go t.loop(started, 0, nil)
	<-started
	return t
}

func newTracer() *Tracer {
	return &Tracer{
		reqs:       make(chan request),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		procs:      make(map[int]*Process),
		threads:    make(map[int]*thread),
		leftTraced: make(map[int]struct{}),
	}
}

// hasChildren reports whether the calling OS thread has a child it could
// wait for (before it traces anything: a tracee would count too). Such a
// thread would see their exits among its tracees' wait events; the tracer
// wants a thread without them. The kernel is asked (a wait that takes
// nothing, WNOWAIT|WNOHANG), not /proc/thread-self/children, which a
// kernel without CONFIG_PROC_CHILDREN or a masked /proc lacks: only
// ECHILD means none, and any other answer counts as children.
func hasChildren() bool {
	_, err := peekWait(unix.WNOHANG)
	return err != unix.ECHILD
}

// safetyPoll bounds how long a tracee event can wait unnoticed if a SIGCHLD
// was somehow missed (say, another package reset the handler).
const safetyPoll = 100 * time.Millisecond

// drainGap is the shortest time between two drains prompted by SIGCHLD:
// how long, at most, a stop of a thread nobody is sampling (a signal to
// deliver, a group-stop, a new thread's first stop) waits beyond the
// signal. Kept short: a new thread does not run until it is resumed.
const drainGap = 2 * time.Millisecond

// loopAttempts bounds the threads loop tries before it keeps one with
// children, or the main thread (strays).
const loopAttempts = 8

// loop is the tracer goroutine. It wants a thread that never has a child
// that is not a tracee (a stray), so that one wait4 for any tracee
// consumes the next event: no request the tracer runs forks, so a child
// can only be there from before (a pooled thread that once ran
// exec.Cmd.Start) or be given to the thread when another thread of the
// process exits, or when an orphan is reparented to this process (a
// child subreaper): the kernel gives those to the first live thread of
// the process, the main thread (since Linux 3.19; before, to the next
// thread of the list, which could be this one). So loop takes neither a thread with
// children nor the main thread, where it can (loopAttempts); otherwise it
// sets strays, and each wait peeks first (next). held, if not nil, is
// closed once this goroutine locked its thread.
func (t *Tracer) loop(started chan<- struct{}, attempt int, held chan<- struct{}) {
	// Never unlocked: when this goroutine returns, the runtime ends the OS
	// thread, and the kernel detaches whatever it still traced.
	runtime.LockOSThread()
	if held != nil {
		close(held)
	}
	if attempt < loopAttempts && unix.Gettid() == unix.Getpid() {
		// The main thread, which the runtime does not end: hold it
		// until the next attempt runs on another thread, then give it
		// back. (The first goroutine a program starts often runs on it.)
		// Checked first: returning locked, it would be parked for good.
		next := make(chan struct{})
		go t.loop(started, attempt+1, next)
		<-next
		runtime.UnlockOSThread()
		return
	}
	if attempt < loopAttempts && hasChildren() {
		// A pooled thread that once ran exec.Cmd.Start: retire it (its
		// children move to another thread of the process) and try again.
		go t.loop(started, attempt+1, nil)
		return
	}
	t.tid = unix.Gettid()
	t.strays = t.tid == unix.Getpid() || hasChildren()
	raisePriority()
	// A batch's poll rounds sleep 20 µs; the default timer slack (50 µs)
	// would more than triple that while stopped threads wait.
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	t.spinner = newSpinPolicy()
	// Best effort: it only moves the signal handler to another thread
	// (BenchmarkSampleSteps: the wait for a stop took 40-45 µs with it
	// unblocked here, 23-29 µs blocked).
	blockSIGCHLD()
	defer close(t.done)
	defer t.spinner.close()
	// Every ptrace-stop of a tracee sends SIGCHLD to the tracer, so events
	// of threads nobody is sampling (a signal to deliver, a group-stop, a
	// new thread) are handled promptly instead of leaving the thread stuck.
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, unix.SIGCHLD)
	defer signal.Stop(sigchld)
	tick := time.NewTicker(safetyPoll)
	defer tick.Stop()
	// A drain's wait for any tracee costs time in proportion to
	// the number of traced threads, and sampling itself sends a SIGCHLD per
	// stop: draining at each one cost a 1,000-thread target a fifth of
	// stacktop's CPU. So drains are at least drainGap apart; a SIGCHLD
	// inside the gap arms a timer for its end.
	//
	// Except after a drain that delivered a signal: a thread that gets
	// signals faster than drainGap (a signal storm, a profiling timer)
	// stops again as soon as it is resumed with one, and each of its
	// signals would wait a whole gap, queueing up for seconds while the
	// thread stands still. Such a stop is handled at its SIGCHLD.
	var lastDrain time.Time
	late := time.NewTimer(time.Hour)
	late.Stop()
	lateArmed := false
	hot := false // the last drain delivered a signal
	// again holds a token while a drain ran out of its budget with events
	// left: the loop drains again, after a pending request if there is one.
	again := make(chan struct{}, 1)
	drain := func() {
		before := t.signalStops
		if !t.drain() {
			select {
			case again <- struct{}{}:
			default:
			}
		}
		lastDrain = time.Now()
		if hot = t.signalStops != before; hot {
			// Under a storm the next SIGCHLD is often there already,
			// and this goroutine would never block: let the program's
			// other goroutines (the sampling engine, the signal
			// handler's) run first, with one P they would wait for
			// the runtime's preemption.
			runtime.Gosched()
		}
	}
	close(started)
	for {
		select {
		case r := <-t.reqs:
			r.reply <- t.run(r.fn)
		case <-sigchld:
			if wait := drainGap - time.Since(lastDrain); wait > 0 && !hot {
				if !lateArmed {
					late.Reset(wait)
					lateArmed = true
				}
				continue
			}
			drain()
		case <-late.C:
			lateArmed = false
			drain()
		case <-again:
			drain()
		case <-tick.C:
			if len(t.threads) > 0 || len(t.leftTraced) > 0 {
				drain()
			}
		case <-t.quit:
			t.detachAll()
			return
		}
	}
}

// tracerNice is the nice value the tracer thread asks for. While the
// tracer waits for a CPU, every thread it stopped waits with it: with
// forty spinning threads on two CPUs, a tracer at the targets' priority
// was preempted in the middle of batches and kept threads stopped for
// hundreds of milliseconds, and reached a fifth of the asked rate (bench/
// pressure.sh). At -10 the scheduler runs it first when it wakes; it only
// ever runs briefly (a sample is microseconds of its time), so what it
// takes from others is what sampling costs anyway. Only the tracer thread
// is raised, and only where the kernel allows it (CAP_SYS_NICE, or
// RLIMIT_NICE); otherwise it keeps its priority.
const tracerNice = -10

func raisePriority() {
	if cur, err := unix.Getpriority(unix.PRIO_PROCESS, 0); err == nil && 20-cur <= tracerNice {
		return // already at least as high (getpriority returns 20-nice)
	}
	unix.Setpriority(unix.PRIO_PROCESS, 0, tracerNice) // this thread only, on Linux
}

func (t *Tracer) run(fn func()) (p any) {
	defer func() { p = recover() }()
	fn()
	return nil
}

// do runs fn on the tracer thread and waits for it. A panic in fn is
// re-raised in the caller, so the tracer thread survives to detach.
func (t *Tracer) do(fn func()) error { return t.start(fn)() }

// start hands fn to the tracer thread and returns without waiting for it
// to run; wait, called once, waits for it (and re-raises its panic).
func (t *Tracer) start(fn func()) (wait func() error) {
	wait, err := t.submit(fn)
	if err != nil {
		return func() error { return err }
	}
	return wait
}

// submit is start that says whether fn was handed over: ErrTracerClosed
// if it never will run.
func (t *Tracer) submit(fn func()) (wait func() error, err error) {
	reply := replyPool.Get().(chan any)
	select {
	case t.reqs <- request{fn, reply}:
	case <-t.quit:
		replyPool.Put(reply)
		return nil, ErrTracerClosed
	}
	return func() error {
		p := <-reply
		replyPool.Put(reply)
		if p != nil {
			panic(p)
		}
		return nil
	}, nil
}

// Close detaches every process and stops the tracer thread. It is
// idempotent.
func (t *Tracer) Close() {
	t.closeOnce.Do(func() { close(t.quit) })
	<-t.done
}

// DetachAll detaches every attached process. Call it on SIGINT, SIGTERM,
// SIGHUP and from a deferred recover; it is idempotent and safe from any
// goroutine. It returns the first detach error, after trying all.
func (t *Tracer) DetachAll() error {
	var err error
	if e := t.do(func() { err = t.detachAll() }); e != nil {
		return nil // closed: Close already detached everything
	}
	return err
}

func (t *Tracer) detachAll() error {
	var first error
	for _, p := range t.procs {
		if err := p.detach(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// drain handles every pending wait event of this thread's tracees
// without blocking. Under a signal storm there is always another event,
// so it gives up after drainBudget and reports false: the caller drains
// again once pending requests had their turn.
func (t *Tracer) drain() (done bool) {
	deadline := time.Now().Add(drainBudget)
	for {
		wpid, ws, stray := t.next(unix.WNOHANG)
		if stray {
			t.drainEach(nil)
			return true
		}
		if wpid <= 0 {
			return true
		}
		t.dispatch(wpid, ws)
		if time.Now().After(deadline) {
			return false
		}
	}
}

// drainBudget bounds one drain (see drain).
const drainBudget = 2 * time.Millisecond

// next consumes the next wait event of one of our tracees: wpid is 0 if
// none is pending (WNOHANG), -1 if there is no tracee. Where the thread
// may have children that are not tracees (strays) it peeks first: the
// event of such a child must be left for its owner, so next reports it
// as stray and the caller polls tracees one by one. A tracee no Process
// claims (one left traced by Detach because it slept uninterruptibly,
// now stopping) is consumed: dispatch detaches it. Without strays one
// wait4 for any tracee does it (a 1,000-thread dump makes some 2,000 of
// these waits: the peek doubled their system calls).
func (t *Tracer) next(options int) (wpid int, ws unix.WaitStatus, stray bool) {
	if !t.strays {
		wpid, ws, err := waitAny(options)
		if err != nil {
			return -1, 0, false
		}
		return wpid, ws, false
	}
	pid := peekTracee(options)
	if pid <= 0 {
		return pid, 0, false
	}
	if t.threads[pid] == nil {
		if th, ours := t.adopt(pid); th == nil && !ours {
			return 0, 0, true
		}
	}
	wpid, ws, err := wait4NoHang(pid)
	if err != nil || wpid != pid {
		return 0, 0, false
	}
	return wpid, ws, false
}

// drainEach polls every tracee thread but except.
func (t *Tracer) drainEach(except *thread) {
	for tid, th := range t.threads {
		if th == except {
			continue
		}
		for t.threads[tid] == th {
			wpid, ws, err := wait4NoHang(tid)
			if err == unix.ECHILD {
				th.proc.gone(th)
				break
			}
			if err != nil || wpid != tid {
				break
			}
			th.proc.onStatus(th, ws, false)
		}
	}
}

// dispatch applies a wait status to whichever thread reported it, with the
// default policy (resume unless its process is frozen).
func (t *Tracer) dispatch(wpid int, ws unix.WaitStatus) {
	th := t.threads[wpid]
	if th == nil {
		th, _ = t.adopt(wpid)
	}
	if th == nil {
		// A tracee no Process knows (say, a main thread dropped as a
		// zombie, or one Detach left traced): never leave it stopped.
		delete(t.leftTraced, wpid)
		if ws.Stopped() {
			sig := 0
			if ptraceEvent(ws) == 0 {
				sig = int(ws.StopSignal())
			}
			ptraceReq(unix.PTRACE_DETACH, wpid, 0, uintptr(sig))
		}
		return
	}
	before := t.signalStops
	th.proc.onStatus(th, ws, false)
	if t.signalStops != before {
		t.chase(th)
	}
}

// A thread resumed with a signal stops again, within microseconds, if
// another signal is queued for it. Waiting for that stop's SIGCHLD (the
// kernel, Go's signal handler, the os/signal goroutine, the tracer
// goroutine) costs every further signal a round trip through the
// scheduler, which a loaded machine stretches to a millisecond or more:
// under a few thousand signals a second the queue then grows without end
// (signals seconds late, the target standing still). So after delivering a
// signal the tracer polls that thread for chaseSpin, delivering each
// further signal at once, for at most chaseMax in all.
const (
	chaseSpin = 50 * time.Microsecond
	chaseMax  = time.Millisecond
)

func (t *Tracer) chase(th *thread) {
	if t.batch.running {
		return // a batch's threads may be waiting in their stops: no spinning
	}
	start := time.Now()
	deadline := start.Add(chaseSpin)
	for t.threads[th.tid] == th && th.state == stateRunning {
		wpid, ws, err := wait4NoHang(th.tid)
		if err != nil {
			return
		}
		now := time.Now()
		if wpid != th.tid {
			if now.After(deadline) {
				return
			}
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			continue
		}
		before := t.signalStops
		th.proc.onStatus(th, ws, false)
		if t.signalStops == before || now.Sub(start) > chaseMax {
			return
		}
		deadline = now.Add(chaseSpin)
	}
}

// adopt registers a thread auto-attached by PTRACE_O_TRACECLONE whose
// first stop arrived before its parent's clone event. ours reports whether
// tid is traced by this tracer thread at all, claimed by a Process or not.
func (t *Tracer) adopt(tid int) (th *thread, ours bool) {
	st, err := procmaps.ReadStatus(tid, 0) // /proc/TID/status: the process is not known yet
	if err != nil || st.TracerPID != t.tid {
		return nil, false
	}
	p := t.procs[st.Tgid]
	if p == nil {
		return nil, true
	}
	return p.addThread(tid, stateNewborn), true
}
