package stackdump

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"stacktop/internal/targets"
	"stacktop/profile"
)

// TestDistroGoSystemstack stops goprog while its thread "gosys" is blocked
// in a write from the Go runtime's system stack, inside runtime.systemstack
// (a heap dump to a full pipe). gdb's frames, which end at systemstack
// (the next address it finds is 0), must be the dump's first frames; the
// dump must then go on, as Go's own traceback (and so pprof) does, through
// g.m.curg.sched to the goroutine's frames: the caller of systemstack
// (runtime/debug.WriteHeapDump, method gostack), main.dumpHeap, main.main's
// closure, and runtime.goexit, where the walk is complete.
func TestDistroGoSystemstack(t *testing.T) {
	writeNR, ok := map[string]int{"amd64": 1, "arm64": 64}[runtime.GOARCH]
	if !ok {
		t.Skip("Go stack switches are followed on amd64 and arm64 only")
	}
	needGDB(t)
	tg := targets.Start(t, "goprog", "systemstack")
	if err := targets.WaitSyscall(tg.PID(), "gosys", writeNR, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	res := compareStopped(t, tg, distroWant{
		outermost: []string{"runtime.goexit", "runtime.clone", "runtime.mcall", "runtime.mstart", "runtime.rt0_go"},
		threads:   map[string]string{"gosys": "main.dumpHeap"},
	})
	if res == nil {
		return
	}
	for _, ts := range res.Threads {
		if ts.Name != "gosys" {
			continue
		}
		names := frameNames(ts.Frames)
		i := indexOf(names, "runtime.systemstack")
		if i < 0 {
			t.Fatalf("gosys: no runtime.systemstack frame: %v", names)
		}
		want := []string{"runtime/debug.WriteHeapDump", "main.dumpHeap", "main.main.func", "runtime.goexit"}
		rest := names[i+1:]
		if len(rest) != len(want) {
			t.Fatalf("gosys: frames after runtime.systemstack %v, want %v", rest, want)
		}
		for k, w := range want {
			if !strings.HasPrefix(rest[k], w) {
				t.Errorf("gosys: frame %d after runtime.systemstack is %s, want %s...", k+1, rest[k], w)
			}
		}
		if m := ts.Frames[i+1].Method; m != "gostack" {
			t.Errorf("gosys: the caller of runtime.systemstack was found by %q, want gostack", m)
		}
		if !ts.Complete {
			t.Errorf("gosys: walk not complete: %v", ts.Err)
		}
		return
	}
	t.Fatalf("no thread gosys in the dump")
}

func frameNames(fs []profile.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = strings.TrimSuffix(f.Function, ".abi0")
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
