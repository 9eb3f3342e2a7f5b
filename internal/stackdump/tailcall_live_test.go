package stackdump

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/gdbstack"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// buildTailcall compiles testdata/targets/tailcall.c -O2 -g with the
// host's gcc: with frame pointers, or with SFrame (gas --gsframe), linked
// to libtailcall.so (tailcall_lib.c, -O2 -g) beside it.
func buildTailcall(t *testing.T, variant string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	lib := []string{"-O2", "-g", "-shared", "-fPIC", "-o", filepath.Join(dir, "libtailcall.so"), "../../testdata/targets/tailcall_lib.c"}
	if b, err := exec.Command("gcc", lib...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", lib, err, b)
	}
	out := filepath.Join(dir, "tailcall-"+variant)
	args := []string{"-O2", "-g", "-pthread", "-o", out, "../../testdata/targets/tailcall.c",
		"-L" + dir, "-ltailcall", "-Wl,-rpath," + dir}
	if variant == "fp" {
		args = append(args, "-fno-omit-frame-pointer")
	} else {
		args = append(args, "-fomit-frame-pointer", "-Wa,--gsframe")
	}
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		if variant != "fp" && strings.Contains(string(b), "gsframe") {
			t.Skipf("the host's gas has no --gsframe: %s", b)
		}
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return out
}

// TestTailCallFramesMatchGDB: on -O2 builds whose functions end in jumps
// (two chained tail calls, a one-line wrapper jumping to libc's pause,
// pthread_cond_wait, which jumps inside libc when libc6-dbg gives its
// call sites, and a shared object's function called through the PLT that
// jumps inside its object), every thread's frames equal gdb's, thread for thread,
// tail-call frames included: stacktop rebuilds them from the same DWARF
// call-site records, with method "tailcall". --no-lines turns them off.
func TestTailCallFramesMatchGDB(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
	for _, variant := range []string{"fp", "sframe"} {
		t.Run(variant, func(t *testing.T) {
			tg := targets.StartCommand(t, buildTailcall(t, variant))
			select {
			case <-tg.Ready():
			case <-time.After(targets.ReadyTimeout):
				t.Fatalf("not ready: %s", tg.Output())
			}
			time.Sleep(100 * time.Millisecond) // the threads reach their waits
			tg.Stop()
			defer tg.Cont()
			res, gdb := dumpWithGDB(t, tg.PID(), Options{})
			tails := map[string]bool{}
			for _, ts := range res.Threads {
				want := gdb[ts.TID]
				if len(want) == 0 {
					t.Errorf("thread %d not in gdb's output", ts.TID)
					continue
				}
				for i, w := range want {
					if i >= len(ts.Frames) {
						t.Errorf("thread %d: stacktop has %d frames, gdb #%d is %#x %s", ts.TID, len(ts.Frames), i, w.PC, w.Function)
						break
					}
					f := ts.Frames[i]
					if f.PC != w.PC || (w.Function != gdbstack.SignalFrame && !sameFunction(f.Function, w.Function)) {
						t.Errorf("thread %d frame #%d: stacktop %#x %s (%s), gdb %#x %s", ts.TID, i, f.PC, f.Function, f.Method, w.PC, w.Function)
						break
					}
					if f.Method == "tailcall" {
						tails[f.Function] = true
					}
				}
				if n := len(want); n < len(ts.Frames) && want[n-1].Function != "main" {
					t.Errorf("thread %d: stacktop has %d frames, gdb %d", ts.TID, len(ts.Frames), n)
				}
			}
			for _, fn := range []string{"jump1", "jump2", "wait_pause", "lib_wait"} {
				if !tails[fn] {
					t.Errorf("no tail-call frame for %s (got %v)", fn, tails)
				}
			}

			// Without DWARF there are no call sites: no tail-call frames.
			noLines, err := Run(newTracer(t), tg.PID(), Options{Resolve: resolve.Options{Symbols: resolve.SymbolOptions{NoLines: true}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, ts := range noLines.Threads {
				for _, f := range ts.Frames {
					if f.Method == "tailcall" {
						t.Errorf("--no-lines: thread %d has a tail-call frame %s", ts.TID, f.Function)
					}
				}
			}
		})
	}
}
