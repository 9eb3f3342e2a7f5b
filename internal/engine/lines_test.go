package engine

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
)

// TestLinesLateSameStacks: file:line and inlined frames must not depend on
// when a module's lines became ready. The line tables are held back for
// the first part of a recording (resolve.HoldLinesForTest); the samples taken then must
// end up with the same frames as those taken after, so no stack appears
// twice (once without lines, once with) in the profile.
func TestLinesLateSameStacks(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "cxxinline-sframe3")
	spin := byName(t, tg, "spin")

	gate := make(chan struct{})
	resolve.HoldLinesForTest(gate)
	defer resolve.HoldLinesForTest(nil)
	target := openTargetSymbols(t, tg.PID(), resolve.SymbolOptions{AsyncLines: true})
	e := newEngine(t, target, EngineOptions{Rate: 499, Duration: 3 * time.Second, TIDs: spin})
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()

	// Let samples pile up without lines, then release the lines.
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().Samples < 20 {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("no samples while lines were held back: %+v", e.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	early := e.Snapshot()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lined := withLines(early); lined != 0 {
		t.Fatalf("%d stacks had lines while the line tables were held back: the test proves nothing", lined)
	}
	p := e.Snapshot()

	// Each sampled address sequence has one set of frames.
	byWalk := map[string]string{}
	agg := p.Aggregate(0)
	inlined := int64(0)
	for id, n := range agg.Counts {
		if n == 0 {
			continue
		}
		frames := agg.Stacks[id]
		walk, shown := walkKey(frames), shownKey(frames)
		if prev, ok := byWalk[walk]; ok && prev != shown {
			t.Errorf("one sampled stack, two ways:\n %s\n %s", prev, shown)
		}
		byWalk[walk] = shown
		if !slices.ContainsFunc(frames, func(f profile.Frame) bool { return strings.Contains(f.Function, "spin_thread") }) {
			continue
		}
		if !slices.ContainsFunc(frames, func(f profile.Frame) bool { return f.Inlined }) {
			t.Errorf("spin stack without inlined frames (%d samples): %s", n, shown)
			continue
		}
		inlined += n
		for _, f := range frames {
			if strings.Contains(f.Module, "cxxinline") && f.Line == 0 {
				t.Errorf("frame without a line in %s", shown)
				break
			}
		}
	}
	st := e.Stats()
	t.Logf("%d samples (%d before the lines were ready), %d distinct stacks, %d spin samples with inlined frames", st.Samples, early.Samples, len(byWalk), inlined)
	if inlined < early.Samples {
		t.Errorf("%d spin samples with inlined frames, fewer than the %d taken before the lines were ready", inlined, early.Samples)
	}
}

// TestLinesLateWaitBounded: lines that never become ready do not hold up
// the end of Run (a Ctrl-C in record, a quit in top) beyond lateWait: the
// stacks keep their frames without lines. Run waited for them unbounded
// before, and this test then never ended.
func TestLinesLateWaitBounded(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "cxxinline-sframe3")
	spin := byName(t, tg, "spin")

	gate := make(chan struct{})
	resolve.HoldLinesForTest(gate)
	defer func() { close(gate); resolve.HoldLinesForTest(nil) }()
	target := openTargetSymbols(t, tg.PID(), resolve.SymbolOptions{AsyncLines: true})
	e := newEngine(t, target, EngineOptions{Rate: 499, TIDs: spin})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	for e.Stats().Samples < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still waits for lines held back, 30 s after its end")
	}
	p := e.Snapshot()
	if p.Samples == 0 || withLines(p) != 0 {
		t.Errorf("%d samples, %d stacks with lines; want samples, none with lines", p.Samples, withLines(p))
	}
}

// withLines counts the stacks of p with at least one frame with a line.
func withLines(p *profile.Profile) int {
	n := 0
	for _, s := range p.Stacks {
		if slices.ContainsFunc(s, func(f profile.Frame) bool { return f.Line > 0 }) {
			n++
		}
	}
	return n
}

// walkKey is what was sampled: the address of each frame that is not an
// inlined call.
func walkKey(frames []profile.Frame) string {
	var b strings.Builder
	for _, f := range frames {
		if !f.Inlined {
			fmt.Fprintf(&b, "%#x;", f.PC)
		}
	}
	return b.String()
}

// shownKey is what an output shows of a stack, as folded --lines would.
func shownKey(frames []profile.Frame) string {
	var b strings.Builder
	for _, f := range frames {
		fmt.Fprintf(&b, "%s %s:%d;", f.Name(), f.File, f.Line)
	}
	return b.String()
}

// BenchmarkRecordStart measures what issue 16 asks of record and top: the
// time from attach (Open) to the first sample, and the tick rate achieved
// over a 3 s recording at 999 Hz, of cxxinline's spinning thread while
// the line tables (libc's debug file among them) load. Run it with
// -benchtime=1x (each iteration records 3 s); bench/lines.sh does. The
// sub-benchmarks: no lines at all (the rate without DWARF, for
// comparison), no DWARF cache, a cold cache, a warm one.
func BenchmarkRecordStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (ptrace)")
	}
	tg := targets.Start(b, "cxxinline-sframe3")
	warmDir := b.TempDir()
	// record and top run stacktop's Go code on one CPU (see
	// cmd/stacktop's sampleOnOneCPU): measure them so.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, mode := range []string{"nolines", "nocache", "cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			var first, rate, missed, work float64
			for i := 0; i < b.N; i++ {
				opts := resolve.SymbolOptions{AsyncLines: true}
				switch mode {
				case "nolines":
					opts.NoLines = true
				case "cold":
					opts.CacheDir = b.TempDir()
				case "warm":
					opts.CacheDir = warmDir
					if i == 0 {
						recordOnce(b, tg.PID(), opts, 300*time.Millisecond)
					}
				}
				f, r, m, w := recordOnce(b, tg.PID(), opts, 3*time.Second)
				first += f
				rate += r
				missed += m
				work += w
			}
			n := float64(b.N)
			b.ReportMetric(first/n, "ms-to-first-sample")
			b.ReportMetric(rate/n, "Hz")
			b.ReportMetric(missed/n, "missed-ticks")
			b.ReportMetric(work/n, "ms-longest-tick")
		})
	}
}

// recordOnce attaches, records for d at 999 Hz and detaches. It returns
// the milliseconds from the attach to the first sample, the tick rate, the
// ticks missed and the longest tick's work in milliseconds (the first
// tick, which loads symbol tables, is usually the longest).
func recordOnce(b *testing.B, pid int, opts resolve.SymbolOptions, d time.Duration) (firstMs, hz, missed, longestMs float64) {
	tg := openTargetSymbols(b, pid, opts)
	t0 := time.Now()
	e := newEngine(b, tg, EngineOptions{Rate: 999, Duration: d})
	if err := e.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := tg.Close(); err != nil {
		b.Fatal(err)
	}
	p, st := e.Snapshot(), e.Stats()
	if len(p.Events) == 0 {
		b.Fatal("no samples")
	}
	firstMs = float64(p.Start.Add(p.Events[0].Time).Sub(t0)) / 1e6
	return firstMs, st.Rate, float64(st.MissedTicks), float64(st.TickWorkMax) / 1e6
}

// TestCloseAtEndBeforeLines: with CloseAtEnd, the end of sampling leaves
// the target untraced at once, while Run still waits (up to lateWait) for
// lines held back: a SIGTERM to record must not keep the target traced
// for the lines. The caller's Close then has nothing left to detach and
// no error.
func TestCloseAtEndBeforeLines(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "cxxinline-sframe3")
	spin := byName(t, tg, "spin")

	gate := make(chan struct{})
	resolve.HoldLinesForTest(gate)
	defer func() { close(gate); resolve.HoldLinesForTest(nil) }()
	target := openTargetSymbols(t, tg.PID(), resolve.SymbolOptions{AsyncLines: true})
	e := newEngine(t, target, EngineOptions{Rate: 499, TIDs: spin, CloseAtEnd: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	for e.Stats().Samples < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	if traced(t, tg.PID()) == 0 {
		t.Fatal("no thread traced while sampling")
	}
	cancel()
	for traced(t, tg.PID()) > 0 {
		select {
		case <-done:
			t.Fatal("Run returned before the target was untraced")
		default:
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("Run returned before the target was untraced (it waits for the held lines)")
	default:
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := target.Close(); err != nil {
		t.Errorf("Close after the engine detached: %v", err)
	}
}

// traced counts the threads of pid with a tracer.
func traced(t *testing.T, pid int) int {
	t.Helper()
	tids, err := procmaps.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tid := range tids {
		if st, err := procmaps.ReadStatus(pid, tid); err == nil && st.TracerPID != 0 {
			n++
		}
	}
	return n
}
