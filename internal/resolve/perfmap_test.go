package resolve

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestPerfMapNamesJITCode: frames in anonymous executable memory are named
// from the target's /tmp/perf-PID.map, and code the program generates
// later is named too: the map is read again when it grew.
func TestPerfMapNamesJITCode(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "perfmap")
	t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", tg.PID())) })
	tgt := openTarget(t, tg.PID())

	// leaf is the function a thread runs and whether jit_thread called
	// it; "" while the thread does not exist yet or is still starting
	// (the target announces itself ready right after pthread_create).
	leaf := func(thread string) string {
		t.Helper()
		names, err := tg.Threads()
		if err != nil {
			t.Fatal(err)
		}
		var tids []int
		for tid, n := range names {
			if n == thread {
				tids = append(tids, tid)
			}
		}
		if len(tids) != 1 {
			return ""
		}
		var got string
		tgt.stacks(t, tids, func(ts Stack, err error) {
			if err != nil {
				return // a thread the tracer does not know yet
			}
			if len(ts.Frames) < 2 || ts.Frames[1].Function != "jit_thread" {
				t.Logf("%s: %v, not yet the JIT frame called by jit_thread", thread, ts.Frames)
				return
			}
			got = ts.Frames[0].Function
		})
		return got
	}
	waitLeaf := func(thread, want string, every time.Duration) {
		t.Helper()
		deadline := time.Now().Add(targets.ReadyTimeout)
		for {
			got := leaf(thread)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's leaf is %q, want %s called by jit_thread", thread, got, want)
			}
			time.Sleep(every)
		}
	}
	waitLeaf("jitone", "jit_spin_one", 10*time.Millisecond)
	if err := syscall.Kill(tg.PID(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// The second function is in the map only once the file is read again.
	waitLeaf("jittwo", "jit_spin_two", perfMapRecheck+50*time.Millisecond)
}
