package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/targetfile"
	"codeberg.org/stacktop/stacktop/unwind"
)

// Options configure an Engine.
type Options struct {
	// Period is the back end's sampling period: the profile's unit of
	// weight (a sample's Weight is counted in periods).
	Period time.Duration
	// Duration, if positive, ends Run after that long.
	Duration time.Duration
	// Wall makes the profile a wall-clock one (the back end samples
	// sleeping threads too: ptrace's Idle), labelled so in the outputs.
	Wall bool
	// CloseAtEnd makes Run close the Source as soon as sampling ends (a
	// signal, Duration, the process gone), before it waits up to lateWait
	// for pending lines: the target is released at once, not after the
	// lines. The caller's own Close of the Source then has nothing left to
	// do (Close is safe to call again; ptrace's returns the first error).
	CloseAtEnd bool
	// Timeline, if positive, keeps only that much of the profile's
	// timeline and folds older samples into per-thread, per-stack sums
	// (profile.KeepTimeline): memory bounded on long runs, for outputs
	// that need only totals. 0 keeps the whole timeline.
	Timeline time.Duration
	// Notes, if set, says what the back end's samples lack (perf: no
	// kernel time, throttling, children dropped). Run asks it after each
	// round, on its own goroutine, so a Source whose counters only its
	// Next touches needs no lock for it; Stats returns the last answer.
	Notes func() []string
}

// Engine aggregates the samples of one back end into a profile.Profile:
// it names each sample's stack with a Resolver, keeps per-thread names and
// last stacks, and counts what the back end reports. Run drives it from
// one goroutine; Snapshot and Stats may be called from any other.
type Engine struct {
	src   backend.Source
	res   *resolve.Resolver
	opts  Options
	yield func(*backend.Sample) // e.take, bound once

	// Owned by Run's goroutine.
	threads map[int]*thread
	batch   []sampled // this round's samples, added under mu at its end
	rounds  int64
	buf     []byte
	// late holds the stacks added before their lines were ready (line
	// tables load in the background): the walk's frames by stack id, to
	// name again once they are, so a stack is the same whenever it was
	// taken. Owned by Run's goroutine.
	late map[int32][]unwind.Frame
	// lateTried is the resolver's readiness when late was last tried.
	lateTried int64

	mu    sync.Mutex // guards prof (writes happen under it) and st
	prof  *profile.Profile
	st    engineStats
	start time.Time
}

// thread is what the engine remembers of one thread between rounds.
type thread struct {
	tid      int
	name     string
	named    time.Time // when name was read
	stack    []profile.Frame
	complete bool
	pending  []unwind.Frame  // stack's frames whose lines were not ready
	profiled *profile.Thread // its record in the profile, once it has one
	seen     int64           // the round of its last sample
}

// sampled is one sample of a round, added to the profile under the lock
// once the whole round was taken.
type sampled struct {
	th       *thread
	at       time.Time
	frames   []profile.Frame
	complete bool
	weight   int64 // in periods; 0 counts as 1
	reused   bool  // Unchanged: the thread's last stack again
	state    profile.ThreadState
	pause    time.Duration
	total    time.Duration
	missed   bool // the walk read stack beyond the copy (Stats.StackMissed)
	// pending: frames lack lines not ready yet (resolve.Stack's).
	pending []unwind.Frame
}

// engineStats are the counters behind Stats, guarded by Engine.mu.
type engineStats struct {
	ticks, missedTicks     int64
	shortTicks             int64
	samples, stops, reused int64
	failed, gone, notTaken int64
	lost, asleep, late     int64
	cpu                    time.Duration
	stackMissed            int64
	pause, pauseTotal      histogram
	interrupts             map[int]int64
	threads                int
	exited                 bool
	lastErr                error
	elapsed                time.Duration
	tickWork, tickWorkMax  time.Duration
	notes                  []string // Options.Notes after the last round
}

// Stats is a copy of the engine's counters.
type Stats struct {
	Elapsed     time.Duration
	Ticks       int64   // ticks run
	MissedTicks int64   // ticks skipped because sampling overran the period
	Lost        int64   // samples the kernel dropped (a back end that buffers: perf)
	Rate        float64 // achieved ticks per second
	Samples     int64   // thread stacks added to the profile (Stops + Reused)
	Stops       int64   // thread samples that stopped the thread (PTRACE_INTERRUPT)
	Reused      int64   // --idle samples that reused an unchanged thread's stack
	Failed      int64   // thread samples that failed (not counting exits)
	Gone        int64   // thread samples not taken because the thread exited
	Truncated   int64   // stacks that did not reach the outermost frame
	// StackMissed counts samples whose walk read part of the thread's
	// stack from the live process, beyond the back end's copy: the thread
	// ran since, so those frames may be off. ptrace then copies more of
	// that thread's next samples; perf cannot (the kernel's copy is fixed).
	StackMissed int64
	Methods     map[string]int64
	Threads     int // threads traced now
	// Pause is how long a thread stayed stopped per sample (stop reported
	// by wait -> resume request returned); PauseTotal counts from the
	// PTRACE_INTERRUPT request instead.
	Pause, PauseTotal PauseStats
	// Interrupts counts, per TID, the samples that stopped the thread.
	Interrupts map[int]int64
	// TickWork is the mean time one tick took (the back end's Round.Work:
	// scan + samples + unwinds), TickWorkMax the longest.
	TickWork, TickWorkMax time.Duration
	Exited                bool  // the process is gone
	LastErr               error // last sampling error other than an exit
	// Wall tells a wall-clock profile (Options.Wall) from an on-CPU
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
	// Asleep counts on-CPU samples dropped because the stop found the
	// thread asleep in a system call (backend.Round.Asleep).
	Asleep int64
	// LateStops counts on-CPU samples counted at the caller of a system
	// call's wrapper (backend.Sample.LateStop).
	LateStops int64
	// ProcessCPU is the CPU time the process used while it was sampled,
	// from its CPU clock, where the back end reads it (ptrace); 0 if not.
	// An on-CPU profile's Weight x Period estimates it.
	ProcessCPU time.Duration
	// Notes are one-line notes for the user about what the stacks lack
	// and how to get it (resolve.Resolver.GoStackNote, Options.Notes).
	Notes []string
}

// PauseStats summarises durations: exact maximum, median and 99th
// percentile within 2%.
type PauseStats struct {
	N                int64
	Median, P99, Max time.Duration
}

// New prepares aggregating the samples of src, named by res (which must
// describe the same process). It takes no sample yet. The caller keeps
// src and res, and closes them after Run returned.
func New(src backend.Source, res *resolve.Resolver, opts Options) *Engine {
	if opts.Period <= 0 {
		opts.Period = 10 * time.Millisecond
	}
	e := &Engine{
		src: src, res: res, opts: opts,
		threads: map[int]*thread{},
		buf:     make([]byte, 128),
	}
	e.yield = e.take
	e.st.interrupts = map[int]int64{}
	e.start = time.Now()
	e.prof = profile.New(res.PID, procmaps.Cmdline(res.PID), e.start, opts.Period)
	e.prof.KeepTimeline(opts.Timeline)
	e.prof.Wall = opts.Wall
	return e
}

// Run takes rounds of samples until ctx is done, Duration has passed or
// the process exited, and returns nil in those three cases
// (Stats().Exited tells the last one); another error of the back end ends
// it and is returned. Run must be called once.
func (e *Engine) Run(ctx context.Context) error {
	// What the profile says must not depend on when it stopped: wait
	// for the lines still loading, a while (no thread is stopped now).
	defer e.settleLate(lateWait)
	if e.opts.CloseAtEnd {
		defer e.src.Close() // before settleLate (defers run last first)
	}
	e.mu.Lock()
	e.start = time.Now()
	e.prof.Start = e.start
	e.mu.Unlock()
	if e.opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, e.start.Add(e.opts.Duration))
		defer cancel()
	}
	for {
		e.rounds++
		r, err := e.src.Next(ctx, e.yield)
		var notes []string
		if e.opts.Notes != nil {
			notes = e.opts.Notes()
		}
		e.commit(&r, notes)
		switch {
		case errors.Is(err, backend.ErrExited):
			e.markExited(time.Now(), nil)
			return nil
		case err != nil && ctx.Err() != nil:
			e.finish(time.Now())
			return nil
		case err != nil:
			e.markExited(time.Now(), err)
			return err
		}
		if r.Exec {
			e.exec()
		}
		e.resolveLate()
		e.forget()
	}
}

// exec starts over after the process replaced its program: the old
// image's stacks and address space are stale.
func (e *Engine) exec() {
	// While the old image's symbols are there, without waiting: a round
	// must not stall. Stacks still pending keep no lines.
	e.settleLate(0)
	e.res.Reload()
	cmd := procmaps.Cmdline(e.res.PID)
	e.mu.Lock()
	e.prof.Command = cmd
	e.mu.Unlock()
	for _, th := range e.threads {
		th.stack = nil
	}
}

// forgetAfter is how many rounds a thread without a sample is remembered:
// threads come and go, and a thread that has not been sampled for that
// long costs only a name read when it is again.
const forgetAfter = 1 << 12

// forget drops, now and then, the threads not sampled for forgetAfter
// rounds.
func (e *Engine) forget() {
	if e.rounds%forgetAfter != 0 {
		return
	}
	for tid, th := range e.threads {
		if e.rounds-th.seen > forgetAfter {
			delete(e.threads, tid)
		}
	}
}

// take is the back end's yield: it names s's stack at once (s is valid
// only until take returns; ptrace resumed the thread before) and keeps it
// for the round's end.
func (e *Engine) take(s *backend.Sample) {
	th := e.threads[s.TID]
	if th == nil {
		th = &thread{tid: s.TID}
		e.threads[s.TID] = th
	}
	th.seen = e.rounds
	if s.Unchanged {
		if th.stack == nil {
			return // nothing to repeat (not since the last exec)
		}
		e.batch = append(e.batch, sampled{th: th, at: s.Time, frames: th.stack, complete: th.complete, reused: true,
			state: s.State, pending: th.pending})
		return
	}
	st := e.res.Resolve(s)
	th.stack, th.complete, th.pending = st.Frames, st.Complete, st.Pending
	var weight int64
	if s.Weight > 0 {
		weight = max(1, int64((s.Weight+e.opts.Period/2)/e.opts.Period))
	}
	e.batch = append(e.batch, sampled{th: th, at: s.Time, frames: st.Frames, complete: st.Complete,
		weight: weight, pause: s.Pause, total: s.Total, pending: st.Pending, missed: s.StackUse.Missed > 0, state: s.State})
}

func (e *Engine) finish(now time.Time) {
	e.mu.Lock()
	e.st.elapsed = now.Sub(e.start)
	e.syncCounters()
	e.mu.Unlock()
}

// commit adds the round's samples to the profile and its counters to the
// stats.
func (e *Engine) commit(r *backend.Round, notes []string) {
	batch := e.batch
	defer func() { clear(batch); e.batch = batch[:0] }()
	for i := range batch {
		if b := &batch[i]; !b.reused {
			e.refreshName(b.th, b.at)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range batch {
		b := &batch[i]
		// A thread that did not run repeats the stack the profile holds
		// as its last (the same as b.frames), unless it is in another
		// state now (it was running at its last sample): the same frames
		// in another state are another stack.
		if b.reused && b.th.profiled != nil && !b.th.profiled.Dropped() && e.prof.StackState(b.th.profiled.LastStack) == b.state {
			e.prof.Repeat(b.th.profiled, b.at)
		} else {
			b.th.profiled = e.prof.Add(profile.Sample{TID: b.th.tid, ThreadName: b.th.name, Time: b.at,
				Frames: b.frames, Truncated: !b.complete, Weight: b.weight, State: b.state})
			e.noteLines(b.th.profiled.LastStack, b)
		}
		e.st.samples++
		if b.missed {
			e.st.stackMissed++
		}
		switch {
		case b.reused:
			e.st.reused++
		case b.total > 0:
			// A back end that stops threads says how long.
			e.st.stops++
			e.st.interrupts[b.th.tid]++
			e.st.pause.add(b.pause)
			e.st.pauseTotal.add(b.total)
		}
	}
	e.st.ticks += r.Ticks
	e.st.missedTicks += r.Missed
	e.st.failed += r.Failed
	e.st.gone += r.Gone
	e.st.notTaken += r.NotTaken
	e.st.lost += r.Lost
	e.st.asleep += r.Asleep
	e.st.late += r.LateStops
	e.st.cpu += r.CPU
	if r.NotTaken > 0 {
		e.st.shortTicks++
	}
	if r.Err != nil {
		e.st.lastErr = r.Err
	}
	if r.Threads > 0 || r.Ticks > 0 {
		e.st.threads = r.Threads
	}
	if r.Ticks > 0 {
		e.st.tickWork += r.Work
		e.st.tickWorkMax = max(e.st.tickWorkMax, r.Work)
	}
	e.st.elapsed = time.Since(e.start)
	if e.opts.Notes != nil {
		e.st.notes = notes
	}
	e.syncCounters()
}

// noteLines keeps the walk of a stack added without all its lines, or
// completes a stack added so before with b's frames, which have them.
// Called with mu held.
func (e *Engine) noteLines(id int32, b *sampled) {
	if b.pending != nil {
		if e.late == nil {
			e.late = map[int32][]unwind.Frame{}
		}
		if _, ok := e.late[id]; !ok {
			e.late[id] = b.pending
		}
		return
	}
	if _, ok := e.late[id]; ok && !b.reused {
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
	r := e.res.Readiness()
	if r == e.lateTried {
		return
	}
	e.lateTried = r
	type named struct {
		id     int32
		frames []profile.Frame
	}
	var done []named
	for id, walk := range e.late {
		frames, ok := e.res.Rename(walk)
		if !ok {
			continue
		}
		done = append(done, named{id, frames})
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
	e.prof.Missed = e.st.missedTicks + e.st.failed + e.st.lost
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

func (e *Engine) refreshName(th *thread, now time.Time) {
	if th.name != "" && now.Sub(th.named) < nameRefresh {
		return
	}
	th.named = now
	// A thread names itself: escapes stay escaped (\x1b) on top's screen
	// and in every output.
	if name, err := procmaps.ThreadName(e.res.PID, th.tid, e.buf); err == nil {
		if clean := procmaps.EscapeControl(string(name)); clean != th.name {
			th.name = clean
		}
	}
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
		Elapsed: e.st.elapsed, Ticks: e.st.ticks, MissedTicks: e.st.missedTicks, Lost: e.st.lost,
		Samples: e.st.samples, Stops: e.st.stops, Reused: e.st.reused,
		Failed: e.st.failed, Gone: e.st.gone, Truncated: e.prof.Truncated, StackMissed: e.st.stackMissed,
		Wall: e.opts.Wall, Weight: e.prof.Samples, Period: e.opts.Period,
		NotTaken: e.st.notTaken, ShortTicks: e.st.shortTicks, Asleep: e.st.asleep, LateStops: e.st.late, ProcessCPU: e.st.cpu,
		Threads: e.st.threads, Exited: e.st.exited, LastErr: e.st.lastErr,
		Pause: e.st.pause.stats(), PauseTotal: e.st.pauseTotal.stats(),
		TickWorkMax: e.st.tickWorkMax,
		Methods:     e.prof.MethodFrames(),
		Interrupts:  make(map[int]int64, len(e.st.interrupts)),
	}
	for k, v := range e.st.interrupts {
		s.Interrupts[k] = v
	}
	if n := e.res.GoStackNote(); n != "" {
		s.Notes = append(s.Notes, n)
	}
	if n := targetfile.StallNote(); n != "" {
		s.Notes = append(s.Notes, n)
	}
	s.Notes = append(s.Notes, e.st.notes...)
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
