package profile

import (
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
	m := Merge(a.Snapshot(), b.Snapshot())
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
