package stackdump

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/gdbstack"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestDumpMatchesGDBEveryFrame: with DWARF CFI behind SFrame, every frame
// of every thread agrees with gdb down to gdb's last frame: through libc
// (no SFrame, no frame pointers: its .eh_frame), start_thread and clone3,
// and through the DRAP function of the V1/V2 builds, which gas leaves out
// of .sframe.
func TestDumpMatchesGDBEveryFrame(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
	for _, variant := range targets.Variants {
		t.Run("chains-"+variant, func(t *testing.T) {
			compareWithGDB(t, "chains-"+variant, func(ts ThreadStack, i int, want []gdbstack.Frame) {
				// Inside the binary, SFrame builds must use SFrame except
				// for the caller of drap_frame (no FDE before V3): CFI.
				if variant == "fp" || i == 0 || i >= len(ts.Frames) {
					return
				}
				exp, ok := targets.ChainsStacks[ts.Name]
				if !ok || i >= len(exp) {
					return
				}
				m := ts.Frames[i].Method
				wantM := "sframe"
				if ts.Frames[i-1].Function == "drap_frame" && (variant == "sframe1" || variant == "sframe2") {
					wantM = "cfi"
				}
				if m != wantM {
					t.Errorf("thread %s frame #%d (%s) found by %s, want %s", ts.Name, i, ts.Frames[i].Function, m, wantM)
				}
			})
		})
	}
}

// TestDumpSignalFrames: stacks through signal handlers (one and two
// nested signal frames, a handler blocked in libc's pause) agree with gdb
// frame by frame; gdb's "<signal handler called>" is the trampoline frame,
// and the frame below it was restored from the kernel's signal frame.
func TestDumpSignalFrames(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
	for _, variant := range targets.Variants {
		t.Run(variant, func(t *testing.T) {
			signals := map[string]int{}
			compareWithGDB(t, "signals-"+variant, func(ts ThreadStack, i int, want []gdbstack.Frame) {
				if want[i].Function != gdbstack.SignalFrame {
					return
				}
				signals[ts.Name]++
				if i+1 < len(ts.Frames) && ts.Frames[i+1].Method != "signal" {
					t.Errorf("thread %s frame #%d after the signal frame found by %s, want signal", ts.Name, i+1, ts.Frames[i+1].Method)
				}
			})
			for name, n := range map[string]int{"sigspin": 1, "sigsyscall": 1, "signested": 2} {
				if signals[name] != n {
					t.Errorf("thread %s: %d signal frames, want %d", name, signals[name], n)
				}
			}
		})
	}
}

// compareWithGDB dumps the stopped target and requires every frame of
// every thread to equal gdb's (frames of inlined calls included: the
// symbolizer reports them as gdb does, with the PC of their outer frame) (gdb's signal frame, which has no address,
// matches any PC), and the walk to end where gdb's does. check is called
// for each frame index of each thread.
func compareWithGDB(t *testing.T, name string, check func(ts ThreadStack, i int, want []gdbstack.Frame)) {
	compareTargetWithGDB(t, targets.Start(t, name), check)
}

// compareTargetWithGDB is compareWithGDB on a started target; it returns
// the dump.
func compareTargetWithGDB(t *testing.T, tg *targets.Target, check func(ts ThreadStack, i int, want []gdbstack.Frame)) *Result {
	tg.Stop()
	defer tg.Cont()
	res, gdb := dumpWithGDB(t, tg.PID(), Options{})
	if len(res.Threads) != len(gdb) {
		t.Errorf("dumped %d threads, gdb saw %d", len(res.Threads), len(gdb))
	}
	for _, ts := range res.Threads {
		want, ok := gdb[ts.TID]
		if !ok || len(want) == 0 {
			t.Errorf("thread %d (%s) not in gdb's output", ts.TID, ts.Name)
			continue
		}
		for i := range want {
			if i >= len(ts.Frames) {
				t.Errorf("thread %d (%s): stacktop stopped after %d frames (%v), gdb #%d is 0x%x %s",
					ts.TID, ts.Name, len(ts.Frames), ts.Err, i, want[i].PC, want[i].Function)
				break
			}
			if want[i].Function != gdbstack.SignalFrame && ts.Frames[i].PC != want[i].PC {
				t.Errorf("thread %d (%s) frame #%d: stacktop 0x%x %s (%s), gdb 0x%x %s; gdb's stack: %v",
					ts.TID, ts.Name, i, ts.Frames[i].PC, ts.Frames[i].Function, ts.Frames[i].Method, want[i].PC, want[i].Function, want)
				break
			}
			check(ts, i, want)
		}
		// gdb stops at main ("backtrace past-main" is off); below it,
		// __libc_start_call_main, __libc_start_main and _start are ours.
		if len(ts.Frames) > len(want) && want[len(want)-1].Function != "main" {
			t.Errorf("thread %d (%s): stacktop has %d frames, gdb %d; extra #%d 0x%x %s",
				ts.TID, ts.Name, len(ts.Frames), len(want), len(want), ts.Frames[len(want)].PC, ts.Frames[len(want)].Function)
		}
	}
	t.Logf("methods: %s", methodShares(res.Threads))
	return res
}

// methodShares counts the frames found by each method.
func methodShares(threads []ThreadStack) string {
	n := map[string]int{}
	total := 0
	for _, ts := range threads {
		for _, f := range ts.Frames {
			n[f.Method]++
			total++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d (%.0f%%) ", k, n[k], 100*float64(n[k])/float64(total))
	}
	return b.String()
}
