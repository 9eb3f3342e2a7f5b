package ptracesampler

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// modelRuns is a process whose threads' run times the test moves: a
// runSource with exact ground truth.
type modelRuns struct {
	rng   *rand.Rand
	run   map[int]*procmaps.Schedstat // live threads
	dead  uint64                      // what exited threads ran
	busy  []int                       // threads that run at every step
	reads int                         // schedstat reads so far
	// racy: the chance that a busy thread is accounted at any one read,
	// so that some ledger windows do not hold still.
	racy float64
	// inR: the threads whose state reads R (running or runnable);
	// states counts the state reads.
	inR    map[int]bool
	states int
}

func newModel(seed uint64, threads, busy int) *modelRuns {
	m := &modelRuns{rng: rand.New(rand.NewPCG(seed, 1)), run: map[int]*procmaps.Schedstat{}}
	for tid := 1; tid <= threads; tid++ {
		m.run[tid] = &procmaps.Schedstat{}
		if tid <= busy {
			m.busy = append(m.busy, tid)
		}
	}
	return m
}

func (m *modelRuns) tids() []int {
	var tids []int
	for tid := range m.run {
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	return tids
}

// runs makes tid run for ns.
func (m *modelRuns) runs(tid int, ns uint64) {
	ss := m.run[tid]
	ss.RunNS += ns
	ss.Timeslices++
}

// maybeRace accounts a busy thread now and then, as a CPU's scheduler tick
// would in the middle of the engine's reads.
func (m *modelRuns) maybeRace() {
	if len(m.busy) > 0 && m.rng.Float64() < m.racy {
		m.runs(m.busy[m.rng.IntN(len(m.busy))], 1000)
	}
}

func (m *modelRuns) open(th *threadState) bool { return true }
func (m *modelRuns) close(th *threadState)     {}
func (m *modelRuns) state(th *threadState) (runState, bool) {
	m.states++
	return runState{running: m.inR[th.tid]}, true
}
func (m *modelRuns) idle(th *threadState) {}
func (m *modelRuns) done()                {}

func (m *modelRuns) read(th *threadState) (procmaps.Schedstat, bool) {
	m.maybeRace()
	m.reads++
	ss, ok := m.run[th.tid]
	if !ok {
		return procmaps.Schedstat{}, false
	}
	return *ss, true
}

func (m *modelRuns) process() (uint64, error) {
	m.maybeRace()
	sum := m.dead
	for _, ss := range m.run {
		sum += ss.RunNS
	}
	return sum, nil
}

func modelEngine(m *modelRuns) *Source {
	e := &Source{threads: map[int]*threadState{}, runs: m}
	e.ledger.clock = m.process
	return e
}

// TestCheckThreadsFindsEveryRun drives the engine's thread checks over a
// model process: two busy threads, a thousand idle ones of which a few wake
// now and then, threads that exit and start, and ledger windows that do
// not always hold still. Every run of every thread must be found within
// the back-off's bound, whatever the ledger skipped; and the ledger must
// skip: a tick must read far fewer threads than the back-off alone.
func TestCheckThreadsFindsEveryRun(t *testing.T) {
	for _, tc := range []struct {
		name            string
		ledger          bool
		wakeups, churn  float64 // chances per tick
		racy            float64
		maxReadsPerTick float64
	}{
		// Two busy threads, the rest never wake: the ledger proves them
		// idle, and a tick reads little more than the busy threads.
		{name: "quiet", ledger: true, racy: 0.02, maxReadsPerTick: 4},
		{name: "quiet, racier", ledger: true, racy: 0.05, maxReadsPerTick: 8},
		// The back-off alone reads 1,000 idle threads about 60 times a tick.
		{name: "quiet, back-off only", ledger: false, racy: 0.02, maxReadsPerTick: 70},
		// Where the ledger cannot prove much (idle threads wake every few
		// ticks, windows rarely hold still), it costs no extra reads.
		{name: "wakeups", ledger: true, wakeups: 0.2, racy: 0.02, maxReadsPerTick: 70},
		{name: "wakeups and churn", ledger: true, wakeups: 0.3, churn: 0.1, racy: 0.05, maxReadsPerTick: 70},
		{name: "racy windows", ledger: true, racy: 0.3, maxReadsPerTick: 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(7, 1000, 2)
			m.racy = tc.racy
			e := modelEngine(m)
			e.ledger.off = !tc.ledger
			// ran[tid] is the first tick at which the engine must have
			// noticed tid's oldest run it has not yet reported.
			pending := map[int]int64{}
			nextTID := 1001
			const ticks, warmup = 2000, 100
			reads := 0
			for tick := int64(0); tick < ticks; tick++ {
				// Between ticks: the busy threads run, some idle ones wake,
				// threads come and go.
				for _, tid := range m.busy {
					m.runs(tid, 500_000)
				}
				if m.rng.Float64() < tc.wakeups {
					tid := m.tids()[len(m.busy)+m.rng.IntN(len(m.run)-len(m.busy))]
					m.runs(tid, 20_000)
					if _, ok := pending[tid]; !ok {
						pending[tid] = tick
					}
				}
				if m.rng.Float64() < tc.churn {
					tids := m.tids()
					gone := tids[len(m.busy)+m.rng.IntN(len(tids)-len(m.busy))]
					m.runs(gone, 30_000)
					m.dead += m.run[gone].RunNS
					delete(m.run, gone)
					delete(pending, gone)
					m.run[nextTID] = &procmaps.Schedstat{RunNS: 10_000, Timeslices: 1}
					nextTID++
				}
				before := m.reads
				fresh := e.reconcile(m.tids())
				ran := e.checkThreads(tick, fresh)
				if tick >= warmup {
					reads += m.reads - before
				}
				for _, th := range ran {
					delete(pending, th.tid)
				}
				for tid, since := range pending {
					if tick-since > maxCheckInterval+1 {
						t.Fatalf("tick %d: thread %d ran before tick %d and is still not found", tick, tid, since)
					}
				}
			}
			perTick := float64(reads) / float64(ticks-warmup)
			t.Logf("%.1f schedstat reads a tick", perTick)
			if perTick > tc.maxReadsPerTick {
				t.Errorf("%.1f schedstat reads a tick, want at most %.0f", perTick, tc.maxReadsPerTick)
			}
		})
	}
}

// TestLedgerQuiet checks the ledger's verdicts on hand-made ticks.
func TestLedgerQuiet(t *testing.T) {
	clock := uint64(1000)
	var l runLedger
	l.clock = func() (uint64, error) { return clock, nil }
	read := func() {}
	tick := func(n int64, seen uint64, unsure bool) bool {
		l.window(true, read)
		l.record(0, seen)
		q := l.verdict(n, unsure, 0, 0)
		l.settle()
		return q
	}
	// The first tick has nothing to compare with.
	if tick(0, 1000, true) {
		t.Fatal("first tick quiet")
	}
	// 500 ns ran, all of it on threads the window read: quiet.
	clock += 500
	if !tick(1, 500, false) {
		t.Fatal("tick whose runs were all read is not quiet")
	}
	if !l.knownIdle(0) || !l.knownIdle(1) {
		t.Fatal("threads read at ticks 0 and 1 not known idle")
	}
	// 700 ran, 600 of it read: some unread thread ran.
	clock += 700
	if tick(2, 600, false) {
		t.Fatal("tick with 100 ns unread is quiet")
	}
	// Quiet again, but only threads read since tick 2 are known idle.
	if !tick(3, 0, false) {
		t.Fatal("tick 3 not quiet")
	}
	if l.knownIdle(1) || !l.knownIdle(2) {
		t.Fatalf("after the run at tick 2: knownIdle(1) %v, knownIdle(2) %v; want false, true", l.knownIdle(1), l.knownIdle(2))
	}
	// A window that never holds still proves nothing, nor does the next
	// tick (nothing to compare with).
	l.clock = func() (uint64, error) { clock++; return clock, nil }
	if tick(4, 0, false) {
		t.Fatal("tick with a moving clock is quiet")
	}
	l.clock = func() (uint64, error) { return clock, nil }
	if tick(5, 0, false) {
		t.Fatal("tick after an unproven window is quiet")
	}
	if !tick(6, 0, false) {
		t.Fatal("tick 6 not quiet")
	}
	// New threads make a tick unsure: not quiet, unless every reading
	// is proven exact (the base, here taken at tick 6: this model tracks
	// no threads, so none is ever stale).
	clock += 30
	if tick(7, 0, true) {
		t.Fatal("unsure tick with 30 ns unread is quiet")
	}
	clock -= 30 // not a real clock: back to the base's
	l.window(true, read)
	l.verdict(7, true, 0, 0)
	l.settle()
	if !l.quiet {
		t.Fatal("tick whose X is the base is not quiet")
	}
	clock += 100
	// The 100 ns that ran unread are read: every reading is exact again
	// (X is back at the base), so even a thread last read long ago is
	// known idle.
	if !tick(8, 100, false) || !l.knownIdle(0) {
		t.Fatalf("once the unread run is read: quiet %v, knownIdle(0) %v; want true, true", l.quiet, l.knownIdle(0))
	}
	// A thread that exits takes its unread run into the clock: the base
	// proves nothing until a new one is taken.
	l.forget(8)
	clock += 50
	if tick(9, 0, false) {
		t.Fatal("tick with 50 ns unread is quiet")
	}
	if !tick(10, 0, false) || l.knownIdle(8) {
		t.Fatal("after an exit, the base still proves threads read before exact")
	}
	// An unreadable clock turns the ledger off for good.
	l.clock = func() (uint64, error) { return 0, errors.New("no clock") }
	tick(11, 0, false)
	l.clock = func() (uint64, error) { return clock, nil }
	for n := int64(12); n < 15; n++ {
		if tick(n, 0, false) {
			t.Fatal("ledger proves ticks after its clock failed")
		}
	}
}

// TestBackOff checks the schedule of schedstat readings of an idle thread
// and its reset when the thread runs.
func TestBackOff(t *testing.T) {
	var th threadState
	var got []int64
	tick := int64(1)
	for range 9 {
		th.backOff(tick, false)
		got = append(got, th.nextCheck-tick)
		tick = th.nextCheck
	}
	if want := []int64{1, 1, 2, 4, 8, 16, 16, 16, 16}; !slices.Equal(got, want) {
		t.Fatalf("intervals of an idle thread = %v, want %v", got, want)
	}
	th.backOff(tick, true)
	if th.nextCheck != tick+1 || th.idleChecks != 0 {
		t.Fatalf("after a run: next check %d (tick %d), idle checks %d; want the next tick, 0", th.nextCheck, tick, th.idleChecks)
	}
}

// TestSleepUntilDone: a done context wins over a time already past (a late
// tick), every time: select alone picks either, and the back end then ran
// another tick after Ctrl-C or SIGTERM.
func TestSleepUntilDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	past := time.Now().Add(-time.Second)
	for i := 0; i < 1000; i++ {
		if sleepUntil(ctx, past) {
			t.Fatalf("try %d: sleepUntil reported true with its context done", i)
		}
	}
	if !sleepUntil(context.Background(), past) {
		t.Error("sleepUntil(past) = false with a live context")
	}
}
