//go:build linux

package ptrace

import (
	"slices"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

// TestBatchWindowAt: BatchOptions.WindowAt sizes each thread's copy from
// its stack pointer while it is stopped, smaller or larger than
// StackWindow (a larger one takes the batch's big buffer), bounded by
// MaxWindow.
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
	o := BatchOptions{StackWindow: 256, MaxWindow: 1024, WindowAt: func(tid int, r *regs.Set) int {
		asked[tid] = r.SP()
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
	// Both threads want more than their slot, more than MaxWindow: the
	// first to stop gets its copy from the arena (MaxWindow bytes), the
	// other its slot's, the arena being full; in every batch (the arena is
	// free again for each window).
	o.WindowAt = func(int, *regs.Set) int { return 4096 }
	for round := 0; round < 3; round++ {
		_, samples, errs := batchAll(t, p, o)
		var sizes []int
		for i, s := range samples {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			sizes = append(sizes, len(s.Stack))
		}
		slices.Sort(sizes)
		if !slices.Equal(sizes, []int{256, 1024}) {
			t.Errorf("round %d: copies of %v bytes, want one of MaxWindow (1024) and one of the slot (256)", round, sizes)
		}
	}
	// Two that fit the arena together both get what they asked.
	o.WindowAt = func(int, *regs.Set) int { return 512 }
	_, samples, _ = batchAll(t, p, o)
	for _, s := range samples {
		if len(s.Stack) != 512 {
			t.Errorf("thread %d: %d bytes copied, want 512 (two copies of 512 fit the arena)", s.TID, len(s.Stack))
		}
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
}
