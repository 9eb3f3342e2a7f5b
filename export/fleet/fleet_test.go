package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/profile"
)

// growing is a Source: a profile the test adds to, snapshotted under a
// lock as the engine does.
type growing struct {
	mu sync.Mutex
	p  *profile.Profile
	t  time.Time
}

func newGrowing() *growing {
	start := time.Unix(1_700_000_000, 0)
	return &growing{p: profile.New(1, "test", start, 10*time.Millisecond), t: start}
}

var stacks = [][]profile.Frame{
	{{PC: 1, Function: "hot"}, {PC: 2, Function: "a"}, {PC: 3, Function: "main"}},
	{{PC: 4, Function: "cold"}, {PC: 5, Function: "b"}, {PC: 3, Function: "main"}},
}

// add adds n samples spread over two threads and two stacks, some as
// repeats (runs), as the engine does with idle threads.
func (g *growing) add(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := 0; i < n; i++ {
		g.t = g.t.Add(10 * time.Millisecond)
		tid := 10 + i%2
		th := g.p.Add(profile.Sample{TID: tid, ThreadName: fmt.Sprint("t", tid), Time: g.t, Frames: stacks[i%3/2]})
		if i%5 == 0 {
			g.p.Repeat(th, g.t.Add(time.Millisecond))
		}
	}
}

func (g *growing) Snapshot() *profile.Profile {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.p.Snapshot()
}

func totals(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	agg := p.Aggregate(0)
	for tid, st := range agg.ThreadStacks {
		for id, n := range st {
			out[fmt.Sprint(tid, p.Stacks[id][0].Function)] += n
		}
	}
	return out
}

func TestWindowsAddUp(t *testing.T) {
	g := newGrowing()
	var w windower
	sum := map[string]int64{}
	var prevEnd time.Time
	for round := 0; round < 10; round++ {
		g.add(7 + round*3)
		win := w.cut(g.Snapshot())
		if win == nil {
			t.Fatalf("round %d: no window", round)
		}
		if round > 0 && !win.Start.Equal(prevEnd) {
			t.Errorf("round %d: window starts %v, the previous ended %v", round, win.Start, prevEnd)
		}
		prevEnd = win.Start.Add(win.Duration())
		for k, v := range totals(win) {
			sum[k] += v
		}
	}
	if w.cut(g.Snapshot()) != nil {
		t.Errorf("a window with nothing new")
	}
	want := totals(g.Snapshot())
	if fmt.Sprint(sum) != fmt.Sprint(want) {
		t.Errorf("windows add up to %v, the profile has %v", sum, want)
	}
}

// TestWindowsKeepKinds: a window's samples keep what set their stacks
// apart in the profile: truncated walks stay truncated (the window's
// Truncated counts them) and wall-clock samples keep their thread state.
func TestWindowsKeepKinds(t *testing.T) {
	g := newGrowing()
	var w windower
	g.mu.Lock()
	for i := 0; i < 30; i++ {
		g.t = g.t.Add(10 * time.Millisecond)
		s := profile.Sample{TID: 10, Time: g.t, Frames: stacks[0], State: profile.StateRunning}
		if i%3 == 0 {
			s.Truncated, s.State = true, profile.StateSleeping
		}
		g.p.Add(s)
	}
	g.mu.Unlock()
	win := w.cut(g.Snapshot())
	if win == nil || win.Samples != 30 || win.Truncated != 10 {
		t.Fatalf("window of %d samples, %d truncated; want 30, 10", win.Samples, win.Truncated)
	}
	states := map[profile.ThreadState]int64{}
	agg := win.Aggregate(0)
	for id, n := range agg.Counts {
		states[win.StackState(int32(id))] += n
	}
	if states[profile.StateRunning] != 20 || states[profile.StateSleeping] != 10 {
		t.Errorf("window states %v, want 20 running and 10 sleeping", states)
	}
}

// flaky is a Sink that is down until up is set.
type flaky struct {
	mu      sync.Mutex
	up      bool
	reject  bool
	got     []*profile.Profile
	samples int64
	calls   int
}

type tempErr struct{}

func (tempErr) Error() string   { return "connection refused" }
func (tempErr) Retryable() bool { return true }

func (f *flaky) Send(ctx context.Context, w *profile.Profile) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.reject {
		return errors.New("400 bad request")
	}
	if !f.up {
		return tempErr{}
	}
	f.got = append(f.got, w)
	f.samples += w.Samples
	return nil
}
func (f *flaky) Close() error   { return nil }
func (f *flaky) String() string { return "flaky" }

func (f *flaky) setUp(up bool) {
	f.mu.Lock()
	f.up = up
	f.mu.Unlock()
}

// TestOutageBounded: while the sink is down the uploader holds at most
// MaxQueued windows, drops the oldest, counts them, and when the sink
// comes back it sends what it holds; sent + dropped = cut.
func TestOutageBounded(t *testing.T) {
	g := newGrowing()
	sink := &flaky{}
	var log targets.LockedBuffer
	u := New(g, []Sink{sink}, Options{Interval: time.Hour, MaxQueued: 3, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Log: &log})
	for i := 0; i < 10; i++ {
		g.add(5)
		u.cutAndQueue()
		time.Sleep(10 * time.Millisecond)
		r := u.sinks[0]
		r.mu.Lock()
		held := len(r.queue)
		if r.inFlight {
			held++
		}
		r.mu.Unlock()
		if held > 3 {
			t.Fatalf("holding %d windows, MaxQueued 3", held)
		}
	}
	sink.setUp(true)
	st := u.Close()
	s := st.Sinks[0]
	if st.Windows != 10 || s.Sent+s.Dropped != 10 || s.Dropped != 7 || s.Sent != 3 || s.Retries == 0 {
		t.Errorf("stats %+v", st)
	}
	if c := countLines(log.String(), "unreachable"); c != 1 {
		t.Errorf("%d outage lines:\n%s", c, log.String())
	}
	if countLines(log.String(), "resumed") != 1 {
		t.Errorf("no recovery line:\n%s", log.String())
	}
	// The windows kept are the newest: the last one holds the last samples.
	last := sink.got[len(sink.got)-1]
	if got, want := last.Start.Add(last.Duration()), g.Snapshot().Start.Add(g.Snapshot().Duration()); !got.Equal(want) {
		t.Errorf("last window ends %v, the profile %v", got, want)
	}
}

func TestRejectedDropped(t *testing.T) {
	g := newGrowing()
	sink := &flaky{reject: true}
	u := New(g, []Sink{sink}, Options{Interval: time.Hour})
	g.add(10)
	u.cutAndQueue()
	st := u.Close()
	if s := st.Sinks[0]; s.Dropped != 1 || s.Sent != 0 || s.Retries != 0 || sink.calls != 1 {
		t.Errorf("stats %+v, %d calls", st, sink.calls)
	}
}

// TestCloseBounded: Close gives a sink that stays down FlushTimeout, then
// counts what it held as dropped.
func TestCloseBounded(t *testing.T) {
	g := newGrowing()
	sink := &flaky{}
	u := New(g, []Sink{sink}, Options{Interval: time.Hour, MinBackoff: 10 * time.Millisecond, FlushTimeout: 200 * time.Millisecond})
	g.add(10)
	u.cutAndQueue()
	g.add(10)
	start := time.Now()
	st := u.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	if s := st.Sinks[0]; s.Dropped != 2 || s.Sent != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRunCuts: Run cuts on its interval, and every sample reaches the
// sink once.
func TestRunCuts(t *testing.T) {
	g := newGrowing()
	sink := &flaky{up: true}
	u := New(g, []Sink{sink}, Options{Interval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.Run(ctx); close(done) }()
	for i := 0; i < 10; i++ {
		g.add(3)
		time.Sleep(15 * time.Millisecond)
	}
	cancel()
	<-done
	st := u.Close()
	if sink.samples != g.Snapshot().Samples || st.Sinks[0].Sent < 3 {
		t.Errorf("sent %d samples in %d windows, the profile has %d", sink.samples, st.Sinks[0].Sent, g.Snapshot().Samples)
	}
}

func countLines(s, sub string) (n int) {
	for _, line := range splitLines(s) {
		if contains(line, sub) {
			n++
		}
	}
	return n
}

func splitLines(s string) []string { return strings.Split(s, "\n") }
func contains(s, sub string) bool  { return strings.Contains(s, sub) }

// TestWindowsAddUpUnderChurn: with the profile folding and retiring
// threads (a new TID a sample, as a thread per request has it), the
// windows still add up to the profile's samples: a retired thread's
// earlier samples, now under its name's record, are not sent again.
func TestWindowsAddUpUnderChurn(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	p := profile.New(1, "test", start, 10*time.Millisecond)
	p.KeepTimeline(time.Minute)
	var w windower
	var sent int64
	tid := 100
	for at := time.Duration(0); at < 8*time.Minute; at += 10 * time.Millisecond {
		p.Add(profile.Sample{TID: tid, ThreadName: "req", Time: start.Add(at), Frames: stacks[tid%2]})
		tid++
		if at%(15*time.Second) == 0 {
			if win := w.cut(p.Snapshot()); win != nil {
				sent += win.Samples
			}
		}
	}
	if win := w.cut(p.Snapshot()); win != nil {
		sent += win.Samples
	}
	if sent != p.Samples {
		t.Errorf("windows sent %d samples, the profile holds %d", sent, p.Samples)
	}
	if len(w.prev) > 100_000 {
		t.Errorf("the windower remembers %d (thread, stack) totals", len(w.prev))
	}
}
