package profile

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMerge(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	fr := func(names ...string) []Frame {
		out := make([]Frame, len(names))
		for i, n := range names {
			out[i] = Frame{PC: uint64(0x1000 + i), Function: n, Module: "/bin/x", Method: "fp"}
		}
		return out
	}
	a := New(10, "a", t0.Add(time.Second), 10*time.Millisecond)
	b := New(20, "b", t0, 10*time.Millisecond)
	for i := 0; i < 3; i++ {
		a.Add(Sample{TID: 10, ThreadName: "main", Time: t0.Add(time.Second + time.Duration(i)*10*time.Millisecond), Frames: fr("leaf", "main")})
		b.Add(Sample{TID: 21, ThreadName: "worker", Time: t0.Add(time.Duration(i) * 10 * time.Millisecond), Frames: fr("leaf", "main")})
	}
	b.Add(Sample{TID: 21, ThreadName: "worker", Time: t0.Add(50 * time.Millisecond), Frames: fr("other", "main"), Truncated: true})
	m := new(Merger).Merge(a.Snapshot(), b.Snapshot())
	if m.Samples != 7 || m.Truncated != 1 {
		t.Fatalf("merged %d samples (%d truncated), want 7 (1)", m.Samples, m.Truncated)
	}
	if len(m.Stacks) != 2 {
		t.Errorf("%d stacks after merging, want 2 (the same stack is interned once)", len(m.Stacks))
	}
	if th := m.Threads[10]; th == nil || th.PID != 10 || th.Name != "main" || th.Samples != 3 {
		t.Errorf("thread 10: %+v", th)
	}
	if th := m.Threads[21]; th == nil || th.PID != 20 || th.Samples != 4 {
		t.Errorf("thread 21: %+v", th)
	}
	if !m.Start.Equal(t0) || m.Duration() != time.Second+20*time.Millisecond {
		t.Errorf("start %v, duration %v; want the earliest start and the latest sample 1.02s later", m.Start, m.Duration())
	}
	for i := 1; i < len(m.Events); i++ {
		if m.Events[i].Time < m.Events[i-1].Time {
			t.Fatalf("events out of time order: %+v", m.Events)
		}
	}
	agg := m.Aggregate(0)
	if agg.Total != 7 || agg.ThreadCounts[10] != 3 || agg.ThreadCounts[21] != 4 {
		t.Errorf("aggregate %d total, per thread %v", agg.Total, agg.ThreadCounts)
	}
	// A window from 900ms holds only a's samples.
	if w := m.Aggregate(900 * time.Millisecond); w.Total != 3 {
		t.Errorf("window from 0.9s holds %d samples, want 3", w.Total)
	}
	if got := m.MethodFrames()["fp"]; got != 14 {
		t.Errorf("fp frames %d, want 14 (7 samples of 2 frames)", got)
	}
}

func TestSelectThreads(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	p := New(1, "x", t0, 10*time.Millisecond)
	for i, name := range []string{"hot", "warm", "waker", "hot"} {
		p.Add(Sample{TID: 10 + i%3, ThreadName: name, Time: t0.Add(time.Duration(i) * time.Millisecond), Frames: []Frame{{Function: "f" + name}}})
	}
	q := p.Snapshot().SelectThreads(func(th *Thread) bool { return th.Name != "warm" })
	if len(q.Threads) != 2 || q.Threads[11] != nil {
		t.Fatalf("threads kept: %v", q.Threads)
	}
	agg := q.Aggregate(0)
	if agg.Total != 3 || agg.ThreadCounts[10] != 2 || agg.ThreadCounts[12] != 1 || q.Samples != 3 {
		t.Errorf("kept %d samples (%v), Samples %d; want 3", agg.Total, agg.ThreadCounts, q.Samples)
	}
	if len(p.Events) != 4 {
		t.Errorf("the original lost events")
	}
}

// foldedRun gives p 70 s of 100 Hz samples of threads tid and tid+1 under
// KeepTimeline(1s), so most of them are folded: tid alternates between
// two stacks, tid+1 has a third, truncated one. first, when set, is one
// more stack sampled once at the start (interned first).
func foldedRun(t *testing.T, p *Profile, tid int, first []Frame) {
	t.Helper()
	p.KeepTimeline(time.Second)
	if first != nil {
		p.Add(Sample{TID: tid, ThreadName: "main", Time: p.Start, Frames: first})
	}
	stacks := [][]Frame{stack("spin_a", "busy", "main"), stack("spin_b", "busy", "main")}
	for i := 1; i <= 7000; i++ {
		at := p.Start.Add(time.Duration(i) * 10 * time.Millisecond)
		p.Add(Sample{TID: tid, ThreadName: "main", Time: at, Frames: stacks[i%2]})
		p.Add(Sample{TID: tid + 1, ThreadName: "worker", Time: at, Frames: stack("poll", "loop", "start_thread"), Truncated: true})
	}
	if len(p.Folded) == 0 {
		t.Fatal("nothing was folded: the test needs a folded profile")
	}
}

// byContent sums an aggregate's counts by the stack's leaf-first names.
func byContent(a *Aggregate) map[string]int64 {
	out := map[string]int64{}
	for id, n := range a.Counts {
		if n == 0 {
			continue
		}
		var names []string
		for _, f := range a.Stacks[id] {
			names = append(names, f.Name())
		}
		out[strings.Join(names, ";")] += n
	}
	return out
}

// TestMergeFolded: the folded samples of every input are merged, their
// stack ids remapped like the events'.
func TestMergeFolded(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	a := New(1, "a", t0, 10*time.Millisecond)
	foldedRun(t, a, 10, nil)
	// b interns a stack a lacks first, so its ids differ from the merged ones.
	b := New(2, "b", t0.Add(time.Second), 10*time.Millisecond)
	foldedRun(t, b, 20, stack("only_b", "main"))
	m := new(Merger).Merge(a.Snapshot(), b.Snapshot())
	got := m.Aggregate(0)
	if want := a.Samples + b.Samples; got.Total != want || m.Samples != want {
		t.Fatalf("merged aggregate %d samples (Samples %d), want %d", got.Total, m.Samples, want)
	}
	want := byContent(a.Aggregate(0))
	for k, n := range byContent(b.Aggregate(0)) {
		want[k] += n
	}
	if g := byContent(got); !reflect.DeepEqual(g, want) {
		t.Errorf("merged counts by stack\n got %v\nwant %v", g, want)
	}
	// Two copies of one profile: twice its samples.
	if two := new(Merger).Merge(a.Snapshot(), a.Snapshot()).Aggregate(0); two.Total != 2*a.Samples {
		t.Errorf("two copies merged hold %d samples, want %d", two.Total, 2*a.Samples)
	}
}

// TestSelectThreadsFolded: folded samples of the threads left out are
// left out too, and Truncated counts the kept threads' truncated samples.
func TestSelectThreadsFolded(t *testing.T) {
	p := New(1, "x", time.Unix(1700000000, 0), 10*time.Millisecond)
	foldedRun(t, p, 10, nil)
	q := p.Snapshot().SelectThreads(func(th *Thread) bool { return th.Name == "worker" })
	agg := q.Aggregate(0)
	if agg.Total != 7000 || q.Samples != 7000 || len(agg.ThreadCounts) != 1 {
		t.Errorf("kept %d samples (%v), Samples %d; want the worker's 7000", agg.Total, agg.ThreadCounts, q.Samples)
	}
	if q.Truncated != 7000 {
		t.Errorf("Truncated %d, want 7000 (all the worker's samples)", q.Truncated)
	}
	if q = p.Snapshot().SelectThreads(func(th *Thread) bool { return th.Name == "main" }); q.Truncated != 0 || q.Aggregate(0).Total != 7000 {
		t.Errorf("main: Truncated %d, %d samples; want 0, 7000", q.Truncated, q.Aggregate(0).Total)
	}
}

// TestMergerStableIDs: successive merges of growing profiles keep every
// stack's id, so an earlier merge's aggregate subtracts from a later one
// stack by stack (top's "since reset" over several processes).
func TestMergerStableIDs(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	a := New(1, "a", t0, 10*time.Millisecond)
	b := New(2, "b", t0, 10*time.Millisecond)
	a.Add(Sample{TID: 10, Time: t0, Frames: stack("fa", "main")})
	b.Add(Sample{TID: 20, Time: t0, Frames: stack("fb", "main")})
	var m Merger
	base := m.Merge(a.Snapshot(), b.Snapshot()).Aggregate(0)
	// A new stack in the first process, then more of b's.
	at := t0.Add(10 * time.Millisecond)
	a.Add(Sample{TID: 10, Time: at, Frames: stack("new_in_a", "main")})
	b.Add(Sample{TID: 20, Time: at, Frames: stack("fb", "main")})
	b.Add(Sample{TID: 20, Time: at, Frames: stack("fb", "main")})
	later := m.Merge(a.Snapshot(), b.Snapshot())
	since := later.Aggregate(0).Minus(base)
	want := map[string]int64{"new_in_a;main": 1, "fb;main": 2}
	if g := byContent(since); !reflect.DeepEqual(g, want) || since.Total != 3 {
		t.Errorf("since the first merge: %v (total %d), want %v", g, since.Total, want)
	}
	for id, n := range since.Counts {
		if n < 0 {
			t.Errorf("stack %d: %d samples since the first merge", id, n)
		}
	}
	if one := m.Merge(a.Snapshot()); one.Command != "a" || one.Aggregate(0).Total != a.Samples {
		t.Errorf("merger of one profile: command %q, %d samples; want a, %d", one.Command, one.Aggregate(0).Total, a.Samples)
	}
	// SetFrames in an input shows in the next merge, under the same id.
	full := stack("fa", "main")
	full[0].Line = 7
	a.SetFrames(0, full)
	if st := m.Merge(a.Snapshot(), b.Snapshot()).Stacks[0]; st[0].Line != 7 {
		t.Errorf("merged stack 0 after SetFrames: %+v", st)
	}
}
