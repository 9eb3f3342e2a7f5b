package sampler

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"stacktop/internal/targets"
)

// TestPerfMapNamesJITCode: frames in anonymous executable memory are named
// from the target's /tmp/perf-PID.map, and code the program generates
// later is named too: the map is read again when it grew.
func TestPerfMapNamesJITCode(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "perfmap")
	t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", tg.PID())) })
	tgt := openTarget(t, tg.PID())

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
		if err := tgt.StackEach(tids, func(ts ThreadStack, err error) {
			if err != nil {
				return // a thread the tracer does not know yet
			}
			if len(ts.Frames) < 2 || ts.Frames[1].Function != "jit_thread" {
				t.Errorf("%s: %v, want the JIT frame called by jit_thread", thread, ts.Frames)
			}
			got = ts.Frames[0].Function
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := leaf("jitone"); got != "jit_spin_one" {
		t.Fatalf("jitone's leaf is %q, want jit_spin_one", got)
	}
	if err := syscall.Kill(tg.PID(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(targets.ReadyTimeout)
	for {
		time.Sleep(perfMapRecheck + 50*time.Millisecond)
		got := leaf("jittwo")
		if got == "jit_spin_two" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jittwo's leaf is %q, want jit_spin_two", got)
		}
	}
}
