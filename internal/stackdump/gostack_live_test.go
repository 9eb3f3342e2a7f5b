package stackdump

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/profile"
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
	t.Parallel()
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

// TestDistroGoMcall stops goprog while its thread "goblock" waits in the
// scheduler for its locked goroutine, parked in a channel receive: the
// goroutine called mcall(park_m), which dropped it from m.curg, and the
// thread sleeps in stoplockedm on its system stack. gdb's frames end at
// runtime.mcall (the next address it finds is 0) and must be the dump's
// first frames; the dump must then go on through m.lockedg.sched to the
// goroutine's frames, the same program counters as the Go runtime's own
// traceback of that goroutine (goprog's SIGQUIT dump, taken after the
// dump: the goroutine stays parked for good).
func TestDistroGoMcall(t *testing.T) {
	t.Parallel()
	futexNR, ok := map[string]int{"amd64": 202, "arm64": 98}[runtime.GOARCH]
	if !ok {
		t.Skip("Go stack switches are followed on amd64 and arm64 only")
	}
	needGDB(t)
	tg := targets.Start(t, "goprog")
	if err := targets.WaitSyscall(tg.PID(), "goblock", futexNR, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	res := compareStopped(t, tg, distroWant{
		outermost: []string{"runtime.goexit", "runtime.clone", "runtime.mcall", "runtime.mstart", "runtime.rt0_go"},
		threads:   map[string]string{"goblock": "main.blockHere"},
	})
	if res == nil {
		return
	}
	var got []uint64
	for _, ts := range res.Threads {
		if ts.Name != "goblock" {
			continue
		}
		names := frameNames(ts.Frames)
		i := indexOf(names, "runtime.mcall")
		if i < 0 || i+1 == len(ts.Frames) {
			t.Fatalf("goblock: no frame after runtime.mcall: %v", names)
		}
		if m := ts.Frames[i+1].Method; m != "gostack" {
			t.Errorf("goblock: the caller of runtime.mcall was found by %q, want gostack", m)
		}
		if !ts.Complete {
			t.Errorf("goblock: walk not complete: %v", ts.Err)
		}
		for _, f := range ts.Frames[i+1:] {
			if !f.Inlined {
				got = append(got, f.PC)
			}
		}
	}
	want := goroutineTrace(t, tg, "locked to thread", "main.blockHere")
	if len(got) != len(want) {
		t.Fatalf("goblock: %d frames after runtime.mcall %#x, the runtime's traceback has %d: %#x", len(got), got, len(want), want)
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("goblock: frame %d after runtime.mcall at pc %#x, the runtime's traceback has %#x", k+1, got[k], want[k])
		}
	}
}

// goroutineTrace makes a Go target dump its goroutines (SIGQUIT, which
// also ends it) and returns the program counters of the frames of the
// goroutine whose header has status and whose frames name fn (inlined
// frames have none).
func goroutineTrace(t *testing.T, tg *targets.Target, status, fn string) []uint64 {
	t.Helper()
	if err := syscall.Kill(tg.PID(), syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tg.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("target did not exit after SIGQUIT")
	}
	pcRE := regexp.MustCompile(` pc=0x([0-9a-f]+)$`)
	var out string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out = tg.Output(); strings.Contains(out, "\nrax ") || strings.Contains(out, "\nr0 ") {
			break // the register dump ends the crash output
		}
	}
	for _, block := range strings.Split(out, "\n\n") {
		header, body, _ := strings.Cut(block, "\n")
		if !strings.HasPrefix(header, "goroutine ") || !strings.Contains(header, status) || !strings.Contains(body, fn) {
			continue
		}
		var pcs []uint64
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "created by ") {
				break
			}
			if m := pcRE.FindStringSubmatch(line); m != nil {
				pc, _ := strconv.ParseUint(m[1], 16, 64)
				pcs = append(pcs, pc)
			}
		}
		return pcs
	}
	t.Fatalf("no goroutine [%s] in %s in the target's traceback:\n%s", status, fn, out)
	return nil
}

// TestGoMcallNoDWARF: goprog linked with -ldflags=-w has no DWARF types,
// so the switch from mcall to the locked goroutine's stack is off and
// goblock's stack ends at runtime.mcall (as its idle Ms' stacks do, which
// have no goroutine to miss). The dump must say so in one note that names
// the binary, the cause and the remedy; a dump of the same program with its
// DWARF has no note. (systemstack needs no DWARF on amd64: its frame
// pointer chain crosses to the goroutine's stack.)
func TestGoMcallNoDWARF(t *testing.T) {
	t.Parallel()
	futexNR, ok := map[string]int{"amd64": 202, "arm64": 98}[runtime.GOARCH]
	if !ok {
		t.Skip("Go stack switches are followed on amd64 and arm64 only")
	}
	needPtrace(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not installed")
	}
	root, err := targets.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "goprog-nodwarf")
	build := exec.Command(goTool, "build", "-trimpath", "-buildvcs=false", "-ldflags=-w", "-o", bin, ".")
	build.Dir = filepath.Join(root, "testdata", "targets", "goprog")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags=-w: %v\n%s", err, b)
	}
	for _, c := range []struct {
		name string
		path string
		note bool
	}{
		{"without DWARF", bin, true},
		{"with DWARF", targets.Path("goprog"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := targets.StartCommand(t, c.path)
			select {
			case <-tg.Ready():
			case <-time.After(targets.ReadyTimeout):
				t.Fatalf("no ready line: %s", tg.Output())
			}
			if err := targets.WaitSyscall(tg.PID(), "goblock", futexNR, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			// No lines: the note does not depend on them, and reading a Go
			// program's DWARF lines takes seconds.
			res, err := Run(newTracer(t), tg.PID(), Options{Resolve: resolve.Options{Symbols: resolve.SymbolOptions{NoLines: true}}})
			if err != nil {
				t.Fatal(err)
			}
			var summary bytes.Buffer
			WriteSummary(&summary, res)
			if !c.note {
				if len(res.Notes) != 0 {
					t.Errorf("notes for a Go program with DWARF: %q", res.Notes)
				}
				return
			}
			if len(res.Notes) != 1 {
				t.Fatalf("notes %q, want one about the missing DWARF; summary:\n%s", res.Notes, summary.String())
			}
			n := res.Notes[0]
			// At least the blocked goroutine's thread; another may be
			// caught in a switch too (a spinning goroutine preempted on
			// a loaded machine: CI saw "2 stacks end").
			if !regexp.MustCompile(`\b(1 stack ends|[1-9][0-9]* stacks end)\b`).MatchString(n) {
				t.Errorf("note %q does not count the stacks that end at a switch", n)
			}
			for _, want := range []string{"runtime.mcall", "goprog-nodwarf has no DWARF", "-ldflags=-w", "rebuild"} {
				if !strings.Contains(n, want) {
					t.Errorf("note %q does not say %q", n, want)
				}
			}
			if !strings.HasPrefix(summary.String(), "stacktop: note: "+n+"\n") {
				t.Errorf("summary does not start with the note:\n%s", summary.String())
			}
		})
	}
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
