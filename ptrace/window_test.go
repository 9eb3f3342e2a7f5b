//go:build linux

package ptrace

import "testing"

// TestBatchWindowAt: BatchOptions.WindowAt sizes each thread's copy from
// its stack pointer while it is stopped, smaller or larger than
// StackWindow (a larger one grows the slot).
func TestBatchWindowAt(t *testing.T) {
	tg := startTarget(t, "signals")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	want := func(tid int) int {
		if tid == tg.pid {
			return 100
		}
		return 1024
	}
	asked := map[int]uint64{}
	o := BatchOptions{StackWindow: 256, WindowAt: func(tid int, sp uint64) int {
		asked[tid] = sp
		return want(tid)
	}}
	tids, samples, errs := batchAll(t, p, o)
	if len(tids) < 2 {
		t.Fatalf("%d threads, want 2", len(tids))
	}
	for i, tid := range tids {
		if errs[i] != nil {
			t.Fatalf("thread %d: %v", tid, errs[i])
		}
		s := samples[i]
		if sp, ok := asked[tid]; !ok || sp != s.StackAddr {
			t.Errorf("thread %d: WindowAt asked at %#x (%v), sample's SP %#x", tid, sp, ok, s.StackAddr)
		}
		if len(s.Stack) != want(tid) || s.StackErr != nil {
			t.Errorf("thread %d: %d bytes copied (%v), want %d", tid, len(s.Stack), s.StackErr, want(tid))
		}
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
}
