package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/profile"
)

func runEngine(t *testing.T, tg *Target, opts EngineOptions, timeout time.Duration) (*Engine, Stats) {
	t.Helper()
	e := newEngine(t, tg, opts)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return e, e.Stats()
}

// runEngineUntil runs an engine for at least min, then until enough says
// the profile holds what the test needs, or max has passed.
func runEngineUntil(t *testing.T, tg *Target, opts EngineOptions, min, max time.Duration, enough func(*Engine) bool) (*Engine, Stats) {
	t.Helper()
	e := newEngine(t, tg, opts)
	ctx, cancel := context.WithTimeout(context.Background(), max)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return e, e.Stats()
		case <-tick.C:
			if time.Since(start) >= min && enough(e) {
				cancel()
			}
		}
	}
}

// hasFunc reports whether a stack holds a frame of function name.
func hasFunc(frames []profile.Frame, name string) bool {
	return slices.ContainsFunc(frames, func(f profile.Frame) bool { return f.Function == name })
}

// byName returns the TIDs of pid's threads whose comm is name.
func byName(t *testing.T, tg *targets.Target, name string) []int {
	t.Helper()
	names, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for tid, n := range names {
		if n == name {
			tids = append(tids, tid)
		}
	}
	if len(tids) == 0 {
		t.Fatalf("no thread named %q in %v", name, names)
	}
	return tids
}

// TestEngineSplit checks the on-CPU profile of a thread whose time split
// is known by construction: 75% in a->hot, 25% in b->cold.
func TestEngineSplit(t *testing.T) {
	needRoot(t)
	for _, variant := range []string{"sframe3", "fp"} {
		t.Run(variant, func(t *testing.T) {
			tg := targets.Start(t, "split-"+variant)
			// On-CPU samples count CPU time: on a loaded machine 2 s may
			// not hold enough of it, so the recording runs until it does.
			// Weights (0 to a few periods) make a sample count unevenly:
			// 600 keep the share's noise near what 300 unweighted gave.
			e, st := runEngineUntil(t, openTarget(t, tg.PID()), EngineOptions{Rate: 499}, 2*time.Second, 20*time.Second,
				func(e *Engine) bool { hot, cold := splitShares(e.Snapshot()); return hot+cold >= 600 })
			hot, cold := splitShares(e.Snapshot())
			t.Logf("%d samples, hot %d, cold %d, pause median %v p99 %v", st.Samples, hot, cold, st.Pause.Median, st.Pause.P99)
			checkSplit(t, hot, cold)
		})
	}
}

func splitShares(p *profile.Profile) (hot, cold int64) {
	agg := p.Aggregate(0)
	for id, n := range agg.Counts {
		frames := agg.Stacks[id]
		switch {
		case hasFunc(frames, "hot") && hasFunc(frames, "a"):
			hot += n
		case hasFunc(frames, "cold") && hasFunc(frames, "b"):
			cold += n
		}
	}
	return hot, cold
}

func checkSplit(t *testing.T, hot, cold int64) {
	t.Helper()
	if hot+cold < 200 {
		t.Fatalf("only %d samples in the split chains", hot+cold)
	}
	share := 100 * float64(hot) / float64(hot+cold)
	if tol := targets.SplitTolerance(hot + cold); math.Abs(share-targets.SplitHotShare) > tol {
		t.Errorf("a->hot has %.1f%% of %d samples, want 75 +- %.1f", share, hot+cold, tol)
	}
}

// TestEngineSkipsThreadsThatDidNotRun: in an on-CPU profile a thread that
// never runs is never stopped; the spinners are. A thread is sampled once
// it used half a period of CPU (weight.go): at 999 Hz that is 0.5 ms, which
// a spinner gets even on a heavily loaded machine.
func TestEngineSkipsThreadsThatDidNotRun(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "manythreads-sframe3", "20", "2")
	_, st := runEngine(t, openTarget(t, tg.PID()), EngineOptions{Rate: 999, Duration: 1500 * time.Millisecond}, time.Minute)
	for _, tid := range byName(t, tg, "mt-cond") {
		if n := st.Interrupts[tid]; n != 0 {
			t.Errorf("blocked thread %d was stopped %d times", tid, n)
		}
	}
	var spun int64
	for _, tid := range byName(t, tg, "mt-spin") {
		spun += st.Interrupts[tid]
	}
	if spun == 0 {
		t.Errorf("the spinning threads were never sampled: %+v", st.Interrupts)
	}
	t.Logf("ticks %d, stops %d, spinner stops %d", st.Ticks, st.Stops, spun)
}

// TestEngineIdle: a wall-clock profile counts sleeping threads at every
// tick with their real stack, but stops each of them at most once.
func TestEngineIdle(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "manythreads-sframe3", "20", "2")
	e, st := runEngine(t, openTarget(t, tg.PID()), EngineOptions{Rate: 99, Idle: true, Duration: 1500 * time.Millisecond}, time.Minute)
	p := e.Snapshot()
	sleepers := byName(t, tg, "mt-sleep")
	for _, tid := range sleepers {
		th := p.Threads[tid]
		if th == nil || th.LastStack < 0 {
			t.Fatalf("sleeping thread %d has no sample", tid)
		}
		if !hasFunc(p.Stacks[th.LastStack], "mt_sleep_block") {
			t.Errorf("sleeping thread %d: stack %v lacks mt_sleep_block", tid, names(p.Stacks[th.LastStack]))
		}
		if th.Samples < st.Ticks/2 {
			t.Errorf("sleeping thread %d counted %d times in %d ticks", tid, th.Samples, st.Ticks)
		}
		if n := st.Interrupts[tid]; n > 1 {
			t.Errorf("sleeping thread %d was stopped %d times, want at most once", tid, n)
		}
	}
	if st.Reused == 0 {
		t.Error("no sample reused a stack")
	}
}

func names(frames []profile.Frame) []string {
	var out []string
	for _, f := range frames {
		out = append(out, f.Name())
	}
	return out
}

// TestEngineTIDs samples only the threads asked for.
func TestEngineTIDs(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "manythreads-sframe3", "10", "2")
	spin := byName(t, tg, "mt-spin")[0]
	e, _ := runEngine(t, openTarget(t, tg.PID()), EngineOptions{Rate: 199, TIDs: []int{spin}, Duration: time.Second}, time.Minute)
	p := e.Snapshot()
	if len(p.Threads) != 1 || p.Threads[spin] == nil {
		t.Fatalf("threads sampled: %v, want only %d", p.Threads, spin)
	}
}

// TestEngineChurn: threads created and ended at a high rate while sampling
// at 999 Hz. No error but exits, and the target keeps running afterwards
// with no thread left stopped.
func TestEngineChurn(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "exiter-sframe3", "churn")
	tgt := openTarget(t, tg.PID())
	_, st := runEngine(t, tgt, EngineOptions{Rate: 999, Duration: 2 * time.Second}, time.Minute)
	t.Logf("ticks %d (missed %d), stops %d, gone %d, failed %d (last %v), tick work mean %v max %v", st.Ticks, st.MissedTicks, st.Stops, st.Gone, st.Failed, st.LastErr, st.TickWork, st.TickWorkMax)
	if st.Stops == 0 {
		t.Fatal("no sample taken")
	}
	if st.Failed > st.Stops/100 {
		t.Errorf("%d of %d samples failed: %v", st.Failed, st.Stops, st.LastErr)
	}
	if err := tgt.Close(); err != nil {
		t.Fatal(err)
	}
	checkAlive(t, tg)
}

// checkAlive fails unless the target still makes progress, with no thread
// in a stopped state.
func checkAlive(t *testing.T, tg *targets.Target) {
	t.Helper()
	before, err := tg.Progress()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(50 * time.Millisecond)
		now, err := tg.Progress()
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target made no progress after detach (counter %d)", now)
		}
	}
	states, err := targets.ThreadStates(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	for tid, s := range states {
		if s == 't' || s == 'T' {
			t.Errorf("thread %d left in state %c", tid, s)
		}
	}
}

// TestEngineTargetExits: the recording ends by itself when the process
// exits, with what it sampled until then. At 999 Hz: a spinner is sampled
// once it used half a period of CPU, which it gets in 700 ms even on a
// loaded machine.
func TestEngineTargetExits(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "exiter-sframe3", "exit", "700")
	start := time.Now()
	e, st := runEngine(t, openTarget(t, tg.PID()), EngineOptions{Rate: 999}, 30*time.Second)
	if !st.Exited {
		t.Fatalf("Run returned after %v without the process exiting", time.Since(start))
	}
	p := e.Snapshot()
	if p.Samples == 0 {
		t.Fatal("no sample before the exit")
	}
	if !slices.ContainsFunc(p.Stacks, func(f []profile.Frame) bool { return hasFunc(f, "ex_spin_leaf") }) {
		t.Error("no stack in ex_spin_leaf")
	}
}

// TestHistogramQuantiles compares the histogram's quantiles with exact
// ones on random durations.
func TestHistogramQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h histogram
	var all []time.Duration
	for range 100000 {
		d := time.Duration(r.ExpFloat64() * float64(20*time.Microsecond))
		h.add(d)
		all = append(all, d)
	}
	slices.Sort(all)
	st := h.stats()
	check := func(what string, got, want time.Duration) {
		if got < want*97/100 || got > want*103/100+histBase {
			t.Errorf("%s = %v, exact %v", what, got, want)
		}
	}
	check("median", st.Median, all[len(all)/2])
	check("p99", st.P99, all[len(all)*99/100])
	if st.Max != all[len(all)-1] {
		t.Errorf("max = %v, want %v", st.Max, all[len(all)-1])
	}
	if st.N != int64(len(all)) {
		t.Errorf("n = %d", st.N)
	}
}

// TestEngineStackMissed: chains' bigframe thread has a 70 KiB frame over
// its spinning leaf. Its first sample's walk reads the callers of that
// frame from the live process, beyond the 16 KiB window, and is counted;
// the back end learns and copies more of the thread from then on, so
// (nearly) no later sample is.
func TestEngineStackMissed(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	big := byName(t, tg, "bigframe")[0]
	// 20 stops: a second at 99 Hz, longer where a loaded machine leaves
	// the thread asleep at some ticks.
	_, st := runEngineUntil(t, openTarget(t, tg.PID()), EngineOptions{Rate: 99, Idle: true, TIDs: []int{big}}, time.Second, 30*time.Second,
		func(e *Engine) bool { return e.Stats().Stops >= 20 })
	if st.Stops < 20 {
		t.Fatalf("%d samples that stopped the thread, want at least 20", st.Stops)
	}
	if st.StackMissed < 1 || st.StackMissed > 2 {
		t.Errorf("%d of %d samples read stack beyond the copy, want 1 (the first) or 2", st.StackMissed, st.Stops)
	}
	if st.Truncated != 0 {
		t.Errorf("%d truncated stacks", st.Truncated)
	}
}
