package stackdump

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/testsupport/gdbstack"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// sysPause is pause(2)'s number on x86-64, where the fixture is built.
const sysPause = 34

// TestDumpBigFrames: frames of 24 and 40 KiB over threads blocked in
// pause(), the main thread's and a pthread's, dumped with the default
// 16 KiB window: every frame gdb shows on the same stopped process, and
// every read of each thread's stack served by the copy taken while it was
// stopped (its used stack), none by the live process after it resumed.
func TestDumpBigFrames(t *testing.T) {
	t.Parallel()
	needGDBOnly(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("bigframe-* are x86-64 programs")
	}
	if ptracesampler.DefaultStackWindow > 24<<10 {
		t.Fatalf("the default window (%d) holds the fixture's frames: make them larger", ptracesampler.DefaultStackWindow)
	}
	want := map[string][]string{
		"bigframe-cfi": {"big_block", "big_main", "main"},
		"bigthr":       {"big_block", "big_inner", "big_outer", "big_thread", "start_thread"},
	}
	for _, name := range []string{"bigframe-cfi", "bigframe-fp"} {
		t.Run(name, func(t *testing.T) {
			threads := 0
			tg := targets.Start(t, name)
			for _, comm := range []string{name, "bigthr"} {
				if err := targets.WaitSyscall(tg.PID(), comm, sysPause, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			res := compareTargetWithGDB(t, tg, func(ts ThreadStack, i int, gdb []gdbstack.Frame) {})
			for _, ts := range res.Threads {
				key := ts.Name
				if key != "bigthr" {
					key = "bigframe-cfi"
				}
				var got []string
				for _, f := range ts.Frames {
					got = append(got, f.Function)
				}
				chain := want[key]
				start := slices.Index(got, chain[0])
				if start < 0 || len(got) < start+len(chain) || !slices.Equal(got[start:start+len(chain)], chain) {
					t.Errorf("thread %d (%s): frames %v, want %v in them", ts.TID, ts.Name, got, chain)
				}
				if !ts.Complete {
					t.Errorf("thread %d (%s): incomplete: %v", ts.TID, ts.Name, ts.Err)
				}
				if ts.StackMissed != 0 {
					t.Errorf("thread %d (%s): %d reads of its stack from the live process, want all from the stopped copy", ts.TID, ts.Name, ts.StackMissed)
				}
				threads++
			}
			if threads != 2 {
				t.Errorf("%d threads dumped, want 2", threads)
			}
		})
	}
}
