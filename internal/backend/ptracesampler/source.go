package ptracesampler

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/regs"
)

// DefaultRate is the default sampling rate in Hz: 99, not 100, so ticks do
// not line up with work that runs every 10 ms.
const DefaultRate = 99

// DefaultStackWindow is how many bytes above SP are copied while a thread is
// stopped. 16 KiB holds the frames of typical call chains. It is a hint,
// not a wall: a dump copies a thread's used stack, and record and top copy
// more of a thread whose walks needed more (stacks.go).
const DefaultStackWindow = 16 << 10

// jitter is the largest relative change of one tick's period. The mean
// period stays 1/Rate; the spread keeps ticks from aliasing with periodic
// work of the target.
const jitter = 0.2

// Options configure periodic sampling.
type Options struct {
	Rate        float64 // ticks per second; 0 means DefaultRate
	StackWindow int     // bytes copied above SP while stopped (more where walks need it: stacks.go); 0 means DefaultStackWindow
	// Idle samples for a wall-clock profile: every thread is yielded at
	// every tick, and a thread that did not run since its last sample is
	// not stopped again but yielded Unchanged (its stack cannot have
	// changed). Without Idle only threads running at the tick are
	// sampled, each sample weighted by the CPU time its thread used
	// since its previous one (weight.go).
	Idle bool
	TIDs []int // sample only these threads; nil means all
	Seed uint64
}

// Period is the mean time between two ticks at o.Rate.
func (o Options) Period() time.Duration {
	rate := o.Rate
	if rate <= 0 {
		rate = DefaultRate
	}
	return time.Duration(float64(time.Second) / rate)
}

// Source samples one attached process periodically; it implements
// backend.Source. Next and Close are called from one goroutine.
type Source struct {
	proc   *ptrace.Process
	pid    int
	opts   Options
	period time.Duration
	rng    *rand.Rand
	only   map[int]bool

	threads map[int]*threadState
	order   []*threadState // listed threads, in TID order
	listed  []int          // the tracer's list order was made from
	listGen int64          // counts changes of listed
	wheel   checkWheel
	runs    runSource
	ledger  runLedger
	execs   int
	todo    []*threadState // threads to sample this tick
	tids    []int
	results []stackResult
	// Scratch lists of checkThreads and reconcile, kept between ticks.
	due, window, idle, ran, fresh []*threadState

	tick    int64  // the last tick taken; 0: only baselines so far
	cpu     uint64 // the process CPU clock at the end of the last scan (Round.CPU)
	cpuRead bool
	next    time.Time // when the tick after it is due
	started bool      // the baselines were taken
	carry   bool      // a tick was put off by an exec: take it at once
	sample  backend.Sample
	closed  bool

	// Copies larger than the window (stacks.go): the process's thread
	// stacks, read when a thread's walk first needs more than the window
	// (again at most once a second, for stacks mapped since), and the
	// largest copy.
	stacks     threadStacks
	stacksRead time.Time
	copyLimit  int
	windowAt   func(tid int, r *regs.Set) int // s.threadWindow, bound once
}

// stackResult is one thread's outcome in a tick's batch.
type stackResult struct {
	err  error
	done bool
}

// Open attaches to pid through tracer (every thread, PTRACE_SEIZE: no
// signal, no stop). The tracer serialises the ptrace requests of all
// processes on its locked OS thread.
func Open(tracer *ptrace.Tracer, pid int, opts Options) (*Source, error) {
	proc, err := tracer.Attach(pid)
	if err != nil {
		return nil, err
	}
	return newSource(proc, opts), nil
}

func newSource(proc *ptrace.Process, opts Options) *Source {
	if opts.StackWindow <= 0 {
		opts.StackWindow = DefaultStackWindow
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &Source{
		proc:    proc,
		pid:     proc.PID(),
		opts:    opts,
		period:  opts.Period(),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		threads: map[int]*threadState{},
		runs:    newProcRuns(proc.PID()),
		execs:   proc.Execs(),
	}
	if len(opts.TIDs) > 0 {
		s.only = map[int]bool{}
		for _, tid := range opts.TIDs {
			s.only[tid] = true
		}
	}
	s.ledger.clock = s.runs.process
	s.copyLimit = copyLimit(opts.StackWindow)
	s.windowAt = s.threadWindow
	return s
}

// PID is the sampled process's.
func (s *Source) PID() int { return s.pid }

// Process gives access to the attached process (thread list, execs).
func (s *Source) Process() *ptrace.Process { return s.proc }

// PACMask is the process's pointer-authentication mask on arm64 (0
// elsewhere), which the resolver clears from return addresses.
func (s *Source) PACMask() uint64 {
	m, _ := s.proc.PACMask()
	return m
}

// Period is the mean time between two ticks.
func (s *Source) Period() time.Duration { return s.period }

// Close releases the threads' /proc files and detaches from every
// thread. It is safe to call more than once.
func (s *Source) Close() error {
	if !s.closed {
		s.closed = true
		s.closeThreads()
	}
	return s.proc.Detach()
}

// Next implements backend.Source: it waits for the next tick and takes
// it. The first call only takes each thread's baseline CPU time ("ran
// since the previous tick" needs a previous tick) and then waits for the
// first tick. A tick that finds the process replaced its program returns
// at once with Round.Exec and no samples, so that the consumer reloads
// the address space before it sees a sample of the new program; the next
// call takes the tick.
func (s *Source) Next(ctx context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	var r backend.Round
	if !s.started {
		s.started = true
		s.next = time.Now()
		if s.scan(ctx, 0, time.Now(), yield, &r) {
			return r, backend.ErrExited
		}
	}
	if !s.carry {
		s.next = s.next.Add(s.jittered())
		// A tick that cannot start within a period of its time is
		// missed; one that is merely late runs at once, so a short stall
		// does not lower the rate.
		if late := time.Since(s.next); late >= s.period {
			n := int64(late / s.period)
			s.next = s.next.Add(time.Duration(n) * s.period)
			r.Missed += n
		}
		if dl, ok := ctx.Deadline(); ok && s.next.After(dl) {
			// The tick would come after the end: none is taken.
			<-ctx.Done()
			return r, ctx.Err()
		}
		if !sleepUntil(ctx, s.next) {
			return r, ctx.Err()
		}
		s.tick++
	}
	s.carry = false
	if n := s.proc.Execs(); n != s.execs {
		s.execs = n
		for _, th := range s.threads {
			th.sampled = false // stacks of the old image
			th.stack = learned{}
		}
		s.stacks, s.stacksRead = nil, time.Time{}
		s.carry = true
		r.Exec, r.Threads = true, len(s.threads)
		return r, nil
	}
	if s.scan(ctx, s.tick, time.Now(), yield, &r) {
		return r, backend.ErrExited
	}
	return r, nil
}

// Tick deadlines. A tick gives its threads one period from its start to
// stop, so a tick that cannot take every thread (more busy threads than
// CPUs: a runnable thread stops only when the scheduler gives it a CPU)
// at most halves the rate, within [minTickBudget, maxTickBudget]: at least
// a few of a loaded machine's time slices (a shorter budget at 499 Hz lost
// most samples of a single busy thread on a machine with 40 runnable
// threads per CPU), at most short enough that the end of --duration is
// seen within 100 ms whatever a tick costs (Ctrl-C and SIGTERM end a tick
// at once). Threads still running then are left running and counted as
// not taken (Round.NotTaken).
const (
	minTickBudget = 5 * time.Millisecond
	maxTickBudget = 50 * time.Millisecond
)

// tickDeadline is the deadline of a tick's batch starting at now: a tick's
// budget, and never past ctx's deadline (the end of --duration).
func (s *Source) tickDeadline(ctx context.Context, now time.Time) time.Time {
	budget := min(max(s.period, minTickBudget), maxTickBudget)
	d := now.Add(budget)
	if end, ok := ctx.Deadline(); ok && end.Before(d) {
		d = end
	}
	return d
}

// sleepUntil waits until t, or reports false once ctx is done. A done ctx
// wins over a t already past (a late tick): select would pick either, and
// the loop then ran more ticks after Ctrl-C or SIGTERM (seen: three, 72 ms).
func sleepUntil(ctx context.Context, t time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func (s *Source) jittered() time.Duration {
	f := 1 + jitter*(2*s.rng.Float64()-1)
	return time.Duration(float64(s.period) * f)
}

// scan runs one tick: list the threads, decide which to sample, sample
// them. tick 0 only records baselines. It reports whether the process is
// gone.
func (s *Source) scan(ctx context.Context, tick int64, now time.Time, yield func(*backend.Sample), r *backend.Round) (exited bool) {
	defer func() {
		r.Threads = len(s.threads)
		if tick > 0 {
			r.Ticks = 1
			r.Work = time.Since(now)
		}
		// The process's clock says what a profile of every thread
		// should hold; with --tid it says nothing of the threads asked.
		if cpu, err := s.runs.process(); err == nil && s.only == nil {
			if s.cpuRead {
				r.CPU = time.Duration(cpu - s.cpu)
			}
			s.cpu, s.cpuRead = cpu, true
		}
	}()
	tids := s.proc.Threads()
	if len(tids) == 0 {
		return true
	}
	fresh := s.reconcile(tids)
	ran := s.checkThreads(tick, fresh)
	todo := s.todo[:0]
	switch {
	case tick == 0:
		// Baselines only.
	case s.opts.Idle:
		for _, th := range s.order {
			if th.ranTick != tick && th.sampled {
				s.yieldUnchanged(th, tick, now, yield)
				continue
			}
			// Its state before the stop: once stopped, /proc says t
			// (the stop is ours), whatever the thread was doing.
			s.runningAt(th, tick)
			todo = append(todo, th)
		}
	default:
		todo = s.onCPU(tick, ran, todo)
	}
	s.todo = todo
	if len(todo) == 0 {
		return false
	}
	// One trip to the tracer thread for the whole tick; each thread is
	// resumed before it is yielded (and unwound by the consumer).
	s.tids = s.tids[:0]
	for _, th := range todo {
		s.tids = append(s.tids, th.tid)
	}
	if cap(s.results) < len(todo) {
		s.results = make([]stackResult, len(todo))
	}
	results := s.results[:len(todo)]
	clear(results)
	o := ptrace.BatchOptions{
		StackWindow: s.opts.StackWindow,
		WindowAt:    s.windowAt,
		MaxWindow:   s.copyLimit,
		Deadline:    s.tickDeadline(ctx, time.Now()),
		Cancel:      ctx.Done(),
		OthersStill: func() bool { return s.afterBatch(tick, todo, results) },
	}
	if err := s.proc.SampleBatch(s.tids, o, func(i int, ps *ptrace.Sample, err error) bool {
		results[i] = stackResult{err: err, done: true}
		if err != nil {
			return true
		}
		th := todo[i]
		var weight time.Duration
		late := false
		if !s.opts.Idle {
			// A stack found waiting in the kernel is not where the
			// thread's CPU time went; one at a system call's exit
			// beyond its kernel share goes to the wrapper's caller
			// (weight.go).
			switch s.place(th, ps.Asleep, ps.AtSyscallExit) {
			case dropAsleep:
				r.Asleep++
				s.refund(th)
				return true
			case placedLate:
				r.LateStops++
				late = true
			}
			weight = time.Duration(s.takeCredit(th)) * s.period
		}
		var state profile.ThreadState
		if s.opts.Idle {
			state = s.wallState(th, tick, ps.Asleep)
		}
		th.sampled = true
		// Shares ps.Stack until the next thread: the consumer unwinds
		// before yield returns.
		s.sample = backend.Sample{TID: th.tid, Time: now, Regs: ps.Regs, StackAddr: ps.StackAddr, Stack: ps.Stack,
			Weight: weight, LateStop: late, Pause: ps.Stopped, Total: ps.Total, State: state}
		yield(&s.sample)
		s.learn(th, ps.StackAddr, ps.Regs.TLS, s.sample.StackUse)
		return true
	}); err != nil {
		r.Failed++
		r.Err = err
	}
	for i, th := range todo {
		res := &results[i]
		switch {
		case !res.done:
			s.refund(th) // the batch ended early
		case res.err == nil:
		case errors.Is(res.err, ptrace.ErrProcessExited):
			return true
		case errors.Is(res.err, ptrace.ErrThreadExited), errors.Is(res.err, ptrace.ErrUnknownThread):
			r.Gone++
			s.dropThread(th)
		case errors.Is(res.err, ptrace.ErrNotTaken):
			r.NotTaken++
			s.refund(th)
			if s.opts.Idle && th.sampled {
				// As for a thread that did not run: its last stack.
				s.yieldUnchanged(th, tick, now, yield)
			}
		default:
			r.Failed++
			s.refund(th)
			r.Err = res.err
		}
	}
	clear(results)
	return false
}

// threadWindow is BatchOptions.WindowAt: the copy of thread tid stopped
// with registers r, the window or what its walks learned they need.
func (s *Source) threadWindow(tid int, r *regs.Set) int {
	if th := s.threads[tid]; th != nil && th.stack.end != 0 {
		return th.stack.window(r.SP(), s.opts.StackWindow, s.copyLimit)
	}
	return s.opts.StackWindow
}

// learn sizes th's next copies from what the walk of its sample at sp
// read of its stack (use, set by the consumer in yield).
func (s *Source) learn(th *threadState, sp, tp uint64, use backend.StackUse) {
	if th.stack.learn(sp, tp, use, s.opts.StackWindow, s.stacks) || time.Since(s.stacksRead) < time.Second {
		return
	}
	// A stack mapped since the maps were read (or never read): read them
	// again, between two windows of the batch (no thread stopped).
	s.stacks, s.stacksRead = readThreadStacks(s.pid), time.Now()
	th.stack.learn(sp, tp, use, s.opts.StackWindow, s.stacks)
}

func (s *Source) yieldUnchanged(th *threadState, tick int64, now time.Time, yield func(*backend.Sample)) {
	// It did not run since its last sample: waiting, in what it was last
	// found waiting in, which needs no reading. One last seen running is
	// read: it went to sleep, or it is runnable and got no CPU in the
	// tick (a loaded machine), which is still running time.
	state := th.blocked
	if state == profile.StateUnknown {
		state = s.wallState(th, tick, false)
	}
	s.sample = backend.Sample{TID: th.tid, Time: now, Unchanged: true, State: state}
	yield(&s.sample)
}

var _ backend.Source = (*Source)(nil)
