package gdbstack

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

func needGDB(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
}

// exeRanges returns the address ranges /proc/PID/maps maps from pid's
// executable.
func exeRanges(t *testing.T, pid int) [][2]uint64 {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ranges [][2]uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad maps line %q", sc.Text())
		}
		ranges = append(ranges, [2]uint64{l, h})
	}
	if len(ranges) == 0 {
		t.Fatalf("no mapping of %s in pid %d", exe, pid)
	}
	return ranges
}

// fixturePrefix returns the names of the leading frames whose pc lies in
// the executable: the part of a stack the target's own code made.
func fixturePrefix(frames []Frame, ranges [][2]uint64) []string {
	var names []string
	for _, f := range frames {
		in := false
		for _, r := range ranges {
			in = in || (f.PC >= r[0] && f.PC < r[1])
		}
		if !in {
			break
		}
		names = append(names, f.Function)
	}
	return names
}

// TestBacktraceChains checks gdb's view of every chains variant against
// targets.ChainsStacks, on a stopped target, and that gdb leaves it stopped.
func TestBacktraceChains(t *testing.T) {
	needGDB(t)
	for _, v := range targets.Variants {
		t.Run(v, func(t *testing.T) {
			tg := targets.Start(t, "chains-"+v)
			tg.Stop()
			before, err := tg.Progress()
			if err != nil {
				t.Fatal(err)
			}
			stacks, err := Backtrace(tg.PID())
			if err != nil {
				t.Fatal(err)
			}
			threads, err := tg.Threads()
			if err != nil {
				t.Fatal(err)
			}
			if len(stacks) != len(threads) {
				t.Errorf("gdb saw %d threads, /proc has %d", len(stacks), len(threads))
			}
			ranges := exeRanges(t, tg.PID())
			for tid, comm := range threads {
				frames, ok := stacks[tid]
				if !ok {
					t.Errorf("thread %d (%s) missing from gdb's output", tid, comm)
					continue
				}
				got := fixturePrefix(frames, ranges)
				want := targets.ChainsStacks[comm] // nil for the main thread
				if !reflect.DeepEqual(got, want) {
					t.Errorf("thread %d (%s): gdb %v, want %v\nall frames: %+v", tid, comm, got, want, frames)
				}
			}

			// gdb has detached; the target must still be in group-stop.
			states, err := targets.ThreadStates(tg.PID())
			if err != nil {
				t.Fatal(err)
			}
			for tid, s := range states {
				if s != 'T' {
					t.Errorf("thread %d state %c after gdb detached, want T", tid, s)
				}
			}
			time.Sleep(30 * time.Millisecond) // three progress periods
			if after, _ := tg.Progress(); after != before {
				t.Errorf("progress moved %d -> %d: gdb resumed the target", before, after)
			}
			tg.Cont()
		})
	}
}

// TestBacktraceRunning attaches to a running target: gdb stops it for the
// backtrace and lets it run on afterwards.
func TestBacktraceRunning(t *testing.T) {
	needGDB(t)
	tg := targets.Start(t, "manythreads-fp", "50", "2")
	stacks, err := Backtrace(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	threads, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(stacks) != 51 || len(threads) != 51 {
		t.Errorf("gdb saw %d threads, /proc has %d, want 51", len(stacks), len(threads))
	}
	ranges := exeRanges(t, tg.PID())
	for tid, comm := range threads {
		if want, ok := targets.ManythreadsStacks[comm]; ok {
			if got := fixturePrefix(stacks[tid], ranges); !reflect.DeepEqual(got, want) {
				t.Errorf("thread %d (%s): gdb %v, want %v", tid, comm, got, want)
			}
		}
	}
	p, err := tg.Progress()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(targets.ReadyTimeout)
	for {
		n, err := tg.Progress()
		if err != nil {
			t.Fatal(err)
		}
		if n > p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("target does not run after gdb detached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBacktraceNoProcess(t *testing.T) {
	needGDB(t)
	// A pid that cannot exist: above the kernel's pid_max limit of 2^22.
	if _, err := Backtrace(1 << 23); err == nil {
		t.Error("Backtrace of a missing process succeeded")
	}
}
