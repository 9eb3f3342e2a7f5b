package sampler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"stacktop/procmaps"
	"stacktop/profile"
	"stacktop/ptrace"
	"stacktop/unwind"
)

// DefaultRate is the default sampling rate in Hz: 99, not 100, so ticks do
// not line up with work that runs every 10 ms.
const DefaultRate = 99

// jitter is the largest relative change of one tick's period. The mean
// period stays 1/Rate; the spread keeps ticks from aliasing with periodic
// work of the target.
const jitter = 0.2

// EngineOptions configure periodic sampling.
type EngineOptions struct {
	Rate     float64       // ticks per second; 0 means DefaultRate
	Duration time.Duration // 0: until the context ends or the process exits
	// Idle makes a wall-clock profile: every thread is counted at every
	// tick, and a thread that did not run since its last sample is not
	// stopped again, its last stack is counted once more (it cannot have
	// changed). Without Idle the profile is on-CPU: only threads that ran
	// are sampled, each sample weighted by the CPU time its thread used
	// since its previous one (weight.go).
	Idle bool
	TIDs []int // sample only these threads; nil means all
	Seed uint64
	// Timeline, if positive, keeps only that much of the profile's
	// timeline and folds older samples into per-thread, per-stack sums
	// (profile.KeepTimeline): memory bounded on long runs, for outputs
	// that need only totals. 0 keeps the whole timeline.
	Timeline time.Duration
	// DetachAtEnd makes Run detach the target as soon as sampling ends
	// (a signal, --duration), before it waits up to lateWait for pending
	// lines: the target is untraced at once, not after the lines. The
	// caller's Target.Close then releases the rest and reports the
	// detach's error.
	DetachAtEnd bool
}

// Engine samples one Target periodically into a profile.Profile. Run drives
// it from one goroutine; Snapshot and Stats may be called from any other.
type Engine struct {
	t      *Target
	opts   EngineOptions
	period time.Duration
	rng    *rand.Rand
	only   map[int]bool

	// Owned by Run's goroutine.
	threads map[int]*threadState
	order   []*threadState // listed threads, in TID order
	listed  []int          // the tracer's list order was made from
	listGen int64          // counts changes of listed
	wheel   checkWheel
	runs    runSource
	ledger  runLedger
	execs   int
	buf     []byte
	todo    []*threadState // threads to sample this tick
	batch   []sampled      // this tick's contributions (under --idle, every thread)
	tids    []int
	results []stackResult
	// Scratch lists of checkThreads and reconcile, kept between ticks.
	due, window, idle, ran, fresh []*threadState
	// late holds the stacks added before their lines were ready (line
	// tables load in the background): the walk's frames by stack id, to
	// name again once they are, so a stack is the same whenever it was
	// taken. Owned by Run's goroutine.
	late map[int32][]unwind.Frame
	// lateTried is the symboliser's readiness when late was last tried.
	lateTried int64

	// done is Run's context's: a batch under way gives up its remaining
	// threads when it closes, so Ctrl-C is not held up by a slow tick.
	done <-chan struct{}
	// end is when Duration runs out (zero: never).
	end time.Time

	mu    sync.Mutex // guards prof (writes happen under it) and st
	prof  *profile.Profile
	st    engineStats
	start time.Time
}

// stackResult is one thread's outcome in a tick's batch.
type stackResult struct {
	ts   ThreadStack
	err  error
	done bool
}

// engineStats are the counters behind Stats, guarded by Engine.mu.
type engineStats struct {
	ticks, missedTicks     int64
	shortTicks             int64
	samples, stops, reused int64
	failed, gone, notTaken int64
	pause, pauseTotal      histogram
	interrupts             map[int]int64
	threads                int
	exited                 bool
	lastErr                error
	elapsed                time.Duration
	tickWork, tickWorkMax  time.Duration
}

// Stats is a copy of the engine's counters.
type Stats struct {
	Elapsed     time.Duration
	Ticks       int64   // ticks run
	MissedTicks int64   // ticks skipped because sampling overran the period
	Rate        float64 // achieved ticks per second
	Samples     int64   // thread stacks added to the profile (Stops + Reused)
	Stops       int64   // thread samples that stopped the thread (PTRACE_INTERRUPT)
	Reused      int64   // --idle samples that reused an unchanged thread's stack
	Failed      int64   // thread samples that failed (not counting exits)
	Gone        int64   // thread samples not taken because the thread exited
	Truncated   int64   // stacks that did not reach the outermost frame
	Methods     map[string]int64
	Threads     int // threads traced now
	// Pause is how long a thread stayed stopped per sample (stop reported
	// by wait -> resume request returned); PauseTotal counts from the
	// PTRACE_INTERRUPT request instead.
	Pause, PauseTotal PauseStats
	// Interrupts counts, per TID, the samples that stopped the thread.
	Interrupts map[int]int64
	// TickWork is the mean time one tick took (scan + samples + unwinds),
	// TickWorkMax the longest.
	TickWork, TickWorkMax time.Duration
	Exited                bool  // the process is gone
	LastErr               error // last sampling error other than an exit
	// Wall tells a wall-clock profile (EngineOptions.Idle) from an on-CPU
	// one. Weight is the sum of the samples' weights in periods: on-CPU,
	// the CPU time of the sampled threads (Weight x Period).
	Wall   bool
	Weight int64
	Period time.Duration

	// NotTaken counts thread samples given up because the thread did not
	// stop before its tick's deadline (busy threads waiting for a CPU, or
	// an uninterruptible sleep): it was left running.
	NotTaken int64
	// ShortTicks counts ticks that ended at their deadline with threads
	// not taken.
	ShortTicks int64
	// Notes are one-line notes for the user about what the stacks lack
	// and how to get it (Target.GoStackNote).
	Notes []string
}

// PauseStats summarises durations: exact maximum, median and 99th
// percentile within 2%.
type PauseStats struct {
	N                int64
	Median, P99, Max time.Duration
}

// NewEngine prepares periodic sampling of t. It takes no sample yet.
func NewEngine(t *Target, opts EngineOptions) *Engine {
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	e := &Engine{
		t: t, opts: opts,
		period:  time.Duration(float64(time.Second) / opts.Rate),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		threads: map[int]*threadState{},
		runs:    newProcRuns(t.PID),
		buf:     make([]byte, 128),
		execs:   t.proc.Execs(),
	}
	if len(opts.TIDs) > 0 {
		e.only = map[int]bool{}
		for _, tid := range opts.TIDs {
			e.only[tid] = true
		}
	}
	e.ledger.clock = e.runs.process
	e.st.interrupts = map[int]int64{}
	e.start = time.Now()
	e.prof = profile.New(t.PID, procmaps.Cmdline(t.PID), e.start, e.period)
	e.prof.KeepTimeline(opts.Timeline)
	e.prof.Wall = opts.Idle
	return e
}

// Target returns the sampled target.
func (e *Engine) Target() *Target { return e.t }

// Run samples until ctx is done, Duration has passed or the process exited.
// It returns nil in all three cases; Stats().Exited tells the last one.
// Run must be called once.
func (e *Engine) Run(ctx context.Context) error {
	defer e.closeThreads()
	// What the profile says must not depend on when it stopped: wait
	// for the lines still loading, a while (no thread is stopped now).
	defer e.settleLate(lateWait)
	if e.opts.DetachAtEnd {
		defer e.t.proc.Detach() // before settleLate; Close reports its error
	}
	e.mu.Lock()
	e.start = time.Now()
	e.prof.Start = e.start
	e.mu.Unlock()
	var deadline time.Time
	if e.opts.Duration > 0 {
		deadline = e.start.Add(e.opts.Duration)
	}
	e.done, e.end = ctx.Done(), deadline
	// The first scan only takes each thread's baseline CPU time: "ran
	// since the previous tick" needs a previous tick.
	if e.scan(0, time.Now()) {
		return nil
	}
	next := e.start
	for tick := int64(1); ; tick++ {
		next = next.Add(e.jittered())
		// A tick that cannot start within a period of its time is
		// missed; one that is merely late runs at once, so a short stall
		// does not lower the rate.
		if late := time.Since(next); late >= e.period {
			n := int64(late / e.period)
			next = next.Add(time.Duration(n) * e.period)
			e.mu.Lock()
			e.st.missedTicks += n
			e.mu.Unlock()
		}
		if !deadline.IsZero() && next.After(deadline) {
			e.finish(time.Now())
			return nil
		}
		if !sleepUntil(ctx, next) {
			e.finish(time.Now())
			return nil
		}
		if e.scan(tick, time.Now()) {
			return nil
		}
	}
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
// not taken (Stats.NotTaken).
const (
	minTickBudget = 5 * time.Millisecond
	maxTickBudget = 50 * time.Millisecond
)

// tickDeadline is the deadline of a tick's batch starting at now.
func (e *Engine) tickDeadline(now time.Time) time.Time {
	budget := min(max(e.period, minTickBudget), maxTickBudget)
	d := now.Add(budget)
	if !e.end.IsZero() && e.end.Before(d) {
		d = e.end
	}
	return d
}

// sleepUntil waits until t, or reports false once ctx is done. A done ctx
// wins over a t already past (a late tick): select would pick either.
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

func (e *Engine) jittered() time.Duration {
	f := 1 + jitter*(2*e.rng.Float64()-1)
	return time.Duration(float64(e.period) * f)
}

func (e *Engine) finish(now time.Time) {
	e.mu.Lock()
	e.st.elapsed = now.Sub(e.start)
	e.syncCounters()
	e.mu.Unlock()
}

// sampled is one thread's contribution to a tick, added to the profile
// under the lock once the whole tick was taken.
type sampled struct {
	th       *threadState
	frames   []profile.Frame
	complete bool
	weight   int64 // in periods; 0 counts as 1
	stopped  bool
	pause    time.Duration
	total    time.Duration
	// linesPending: frames lack lines not ready yet (ThreadStack's).
	linesPending []unwind.Frame
}

// scan runs one tick: list the threads, decide which to sample, sample
// them. tick 0 only records baselines. It reports whether the process is
// gone.
func (e *Engine) scan(tick int64, now time.Time) (exited bool) {
	proc := e.t.proc
	if n := proc.Execs(); n != e.execs {
		e.execs = n
		// While the old image's symbols are there, without waiting: a
		// tick must not stall. Stacks still pending keep no lines.
		e.settleLate(0)
		e.t.reload()
		cmd := procmaps.Cmdline(e.t.PID)
		e.mu.Lock()
		e.prof.Command = cmd
		e.mu.Unlock()
		for _, th := range e.threads {
			th.stack = nil // stacks of the old image
		}
	}
	tids := proc.Threads()
	if len(tids) == 0 {
		e.markExited(now, nil)
		return true
	}
	// Reused across ticks: under --idle the batch holds every thread.
	batch := e.batch[:0]
	defer func() { e.batch = batch[:0] }()
	var (
		failed   int64
		gone     int64
		notTaken int64
		lastErr  error
	)
	fresh := e.reconcile(tids)
	ran := e.checkThreads(tick, fresh)
	todo := e.todo[:0]
	switch {
	case tick == 0:
		// Baselines only.
	case e.opts.Idle:
		for _, th := range e.order {
			if th.ranTick != tick && th.stack != nil {
				batch = append(batch, sampled{th: th, frames: th.stack, complete: th.complete})
				continue
			}
			todo = append(todo, th)
		}
	default:
		todo = e.onCPU(ran, todo)
	}
	e.todo = todo
	if len(todo) > 0 {
		// One trip to the tracer thread for the whole tick; each thread is
		// resumed before it is unwound.
		e.tids = e.tids[:0]
		for _, th := range todo {
			e.tids = append(e.tids, th.tid)
		}
		if cap(e.results) < len(todo) {
			e.results = make([]stackResult, len(todo))
		}
		results := e.results[:len(todo)]
		clear(results)
		o := ptrace.BatchOptions{
			Deadline:    e.tickDeadline(time.Now()),
			Cancel:      e.done,
			OthersStill: func() bool { return e.afterBatch(tick, todo, results) },
		}
		if err := e.t.stackEach(e.tids, o, func(i int, ts ThreadStack, err error) {
			results[i] = stackResult{ts: ts, err: err, done: true}
		}); err != nil {
			failed++
			lastErr = err
		}
		for i, th := range todo {
			r := &results[i]
			switch {
			case !r.done:
				e.refund(th)
				continue // the batch ended early
			case errors.Is(r.err, ptrace.ErrProcessExited):
				e.commit(batch, now, failed, gone, notTaken, lastErr)
				e.markExited(now, nil)
				return true
			case errors.Is(r.err, ptrace.ErrThreadExited), errors.Is(r.err, ptrace.ErrUnknownThread):
				gone++
				e.dropThread(th)
				continue
			case errors.Is(r.err, ptrace.ErrNotTaken):
				notTaken++
				e.refund(th)
				if e.opts.Idle && th.stack != nil {
					// As for a thread that did not run: its last stack.
					batch = append(batch, sampled{th: th, frames: th.stack, complete: th.complete})
				}
				continue
			case r.err != nil:
				failed++
				e.refund(th)
				lastErr = r.err
				continue
			}
			ts := &r.ts
			th.stack, th.complete = ts.Frames, ts.Complete
			e.refreshName(th, now)
			var weight int64
			if !e.opts.Idle {
				weight = e.takeCredit(th)
			}
			batch = append(batch, sampled{th: th, frames: ts.Frames, complete: ts.Complete,
				stopped: true, pause: ts.Stopped, total: ts.Total, weight: weight, linesPending: ts.linesPending})
		}
		clear(results) // drop the frames: th.stack keeps what is needed
	}
	if tick > 0 {
		e.commit(batch, now, failed, gone, notTaken, lastErr)
		e.resolveLate()
	}
	return false
}

func (e *Engine) commit(batch []sampled, now time.Time, failed, gone, notTaken int64, lastErr error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range batch {
		b := &batch[i]
		// A thread that did not run repeats the stack the profile holds
		// as its last (the same as b.frames).
		if !b.stopped && b.th.profiled != nil {
			e.prof.Repeat(b.th.profiled, now)
		} else {
			b.th.profiled = e.prof.Add(profile.Sample{TID: b.th.tid, ThreadName: b.th.name, Time: now,
				Frames: b.frames, Truncated: !b.complete, Weight: b.weight})
			e.noteLines(b.th.profiled.LastStack, b)
		}
		e.st.samples++
		if b.stopped {
			e.st.stops++
			e.st.interrupts[b.th.tid]++
			e.st.pause.add(b.pause)
			e.st.pauseTotal.add(b.total)
		} else {
			e.st.reused++
		}
	}
	e.st.ticks++
	e.st.failed += failed
	e.st.gone += gone
	e.st.notTaken += notTaken
	if notTaken > 0 {
		e.st.shortTicks++
	}
	if lastErr != nil {
		e.st.lastErr = lastErr
	}
	e.st.threads = len(e.threads)
	work := time.Since(now)
	e.st.tickWork += work
	e.st.tickWorkMax = max(e.st.tickWorkMax, work)
	e.st.elapsed = time.Since(e.start)
	e.syncCounters()
}

// noteLines keeps the walk of a stack added without all its lines, or
// completes a stack added so before with b's frames, which have them.
// Called with mu held.
func (e *Engine) noteLines(id int32, b *sampled) {
	if b.linesPending != nil {
		if e.late == nil {
			e.late = map[int32][]unwind.Frame{}
		}
		if _, ok := e.late[id]; !ok {
			e.late[id] = b.linesPending
		}
		return
	}
	if _, ok := e.late[id]; ok && b.stopped {
		e.prof.SetFrames(id, b.frames)
		delete(e.late, id)
	}
}

// lateWait bounds how long the end of Run waits for the lines of stacks
// still pending: with a large DWARF, an unbounded wait held shutdown (Ctrl-C
// in record, quit in top) for seconds, and a second Ctrl-C then left no
// file at all. Stacks still pending after it keep their frames without
// lines.
const lateWait = 2 * time.Second

// settleLate resolves the pending stacks, waiting at most d for their
// lines (polling: the lines load in the background), then gives up on the
// rest: their frames stay as added, without lines. Called on Run's
// goroutine while no thread is stopped by the engine, without mu held.
func (e *Engine) settleLate(d time.Duration) {
	e.lateTried = -1 // try at once, whatever loaded since the last tick
	deadline := time.Now().Add(d)
	for {
		e.resolveLate()
		if len(e.late) == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(latePoll)
	}
	clear(e.late)
}

// latePoll is settleLate's pause between two looks at the lines.
const latePoll = 5 * time.Millisecond

// resolveLate names again the stacks added before their lines were ready,
// and replaces the frames of those whose lines are ready now. It never
// waits for lines. Called on Run's goroutine.
func (e *Engine) resolveLate() {
	if len(e.late) == 0 {
		return
	}
	// Naming every pending stack again at every tick would cost ticks
	// while a large unit loads; only a change can help.
	r := e.t.syms.readiness() + e.t.tails.readiness()
	if r == e.lateTried {
		return
	}
	e.lateTried = r
	opts := e.t.opts.Symbols
	opts.AsyncLines = true
	type named struct {
		id     int32
		frames []profile.Frame
	}
	var done []named
	for id, walk := range e.late {
		frames, pending := e.t.symbolizeFrames(walk, opts)
		if pending {
			continue
		}
		// As at the sample (sampler.go): signal trampolines named, a Go
		// stack cut at its root. Completeness was decided then, by the
		// same symbol names.
		ts := ThreadStack{Frames: frames}
		finishStack(&ts)
		done = append(done, named{id, ts.Frames})
		delete(e.late, id)
	}
	if len(done) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range done {
		e.prof.SetFrames(n.id, n.frames)
	}
}

// syncCounters copies the engine's counters into the profile's, which the
// outputs report. Called with mu held.
func (e *Engine) syncCounters() {
	e.prof.Missed = e.st.missedTicks + e.st.failed
	e.prof.Errors = e.st.failed
}

func (e *Engine) markExited(now time.Time, err error) {
	e.mu.Lock()
	e.st.exited = true
	e.st.threads = 0
	e.st.elapsed = now.Sub(e.start)
	if err != nil {
		e.st.lastErr = err
	}
	e.syncCounters()
	e.mu.Unlock()
}

// nameRefresh is how often the name of a sampled thread is read again
// (threads name themselves after they start).
const nameRefresh = time.Second

func (e *Engine) refreshName(th *threadState, now time.Time) {
	if th.name != "" && now.Sub(th.named) < nameRefresh {
		return
	}
	th.named = now
	b, err := readSmall("/proc/"+strconv.Itoa(e.t.PID)+"/task/"+strconv.Itoa(th.tid)+"/comm", e.buf)
	if err == nil {
		if n := len(b); n > 0 && b[n-1] == '\n' {
			b = b[:n-1]
		}
		th.name = string(b)
	}
}

// readSmall reads a small /proc file into buf.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// Snapshot returns an immutable copy of the profile so far.
func (e *Engine) Snapshot() *profile.Profile {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.prof.Snapshot()
}

// Stats returns a copy of the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stats{
		Elapsed: e.st.elapsed, Ticks: e.st.ticks, MissedTicks: e.st.missedTicks,
		Samples: e.st.samples, Stops: e.st.stops, Reused: e.st.reused,
		Failed: e.st.failed, Gone: e.st.gone, Truncated: e.prof.Truncated,
		Wall: e.opts.Idle, Weight: e.prof.Samples, Period: e.period,
		NotTaken: e.st.notTaken, ShortTicks: e.st.shortTicks,
		Threads: e.st.threads, Exited: e.st.exited, LastErr: e.st.lastErr,
		Pause: e.st.pause.stats(), PauseTotal: e.st.pauseTotal.stats(),
		TickWorkMax: e.st.tickWorkMax,
		Methods:     e.prof.MethodFrames(),
		Interrupts:  make(map[int]int64, len(e.st.interrupts)),
	}
	for k, v := range e.st.interrupts {
		s.Interrupts[k] = v
	}
	if n := e.t.GoStackNote(); n != "" {
		s.Notes = append(s.Notes, n)
	}
	if e.st.ticks > 0 {
		s.TickWork = e.st.tickWork / time.Duration(e.st.ticks)
	}
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.Rate = float64(s.Ticks) / secs
	}
	return s
}

// String is the one-line progress form of s.
func (s Stats) String() string {
	return fmt.Sprintf("%5.1fs  %d samples  %.1f Hz  %d threads  %d errors",
		s.Elapsed.Seconds(), s.Samples, s.Rate, s.Threads, s.Failed)
}

// histogram counts durations in buckets 2% wide (log scale from 100 ns),
// so quantiles of millions of pauses cost a fixed 1,200 counters.
type histogram struct {
	counts []int64
	n      int64
	max    time.Duration
}

const (
	histBase  = 100 * time.Nanosecond
	histRatio = 1.02
)

var histLogRatio = math.Log(histRatio)

func (h *histogram) add(d time.Duration) {
	i := 0
	if d > histBase {
		i = int(math.Log(float64(d)/float64(histBase))/histLogRatio) + 1
	}
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]int64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// upper is the largest duration bucket i holds.
func upper(i int) time.Duration {
	if i == 0 {
		return histBase
	}
	return time.Duration(float64(histBase) * math.Pow(histRatio, float64(i)))
}

func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(upper(i), h.max)
		}
	}
	return h.max
}

func (h *histogram) stats() PauseStats {
	return PauseStats{N: h.n, Median: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max}
}
