package stackdump

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/gdbstack"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/unwind"
)

// TestStoppedProcessShowsT: a process stopped by SIGSTOP shows state T (as
// ps does without stacktop), not t, the tracing stop it is in while
// traced; and it stays stopped.
func TestStoppedProcessShowsT(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	tg := targets.Start(t, "chains-fp")
	tg.Stop()
	defer tg.Cont()
	res, err := Run(newTracer(t), tg.PID(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range res.Threads {
		if ts.State != "T" {
			t.Errorf("thread %d (%s): state %q, want T", ts.TID, ts.Name, ts.State)
		}
	}
	waitAllStopped(t, tg.PID(), "after the dump")
}

func needGDBOnly(t *testing.T) {
	t.Helper()
	needPtrace(t)
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
}

// TestDumpSigaltstack: a handler on an alternate signal stack, blocked in
// pause(): gdb's frames through "<signal handler called>" and back on the
// thread's own stack down to clone3, every stack complete.
func TestDumpSigaltstack(t *testing.T) {
	t.Parallel()
	needGDBOnly(t)
	for _, name := range []string{"sigalt-fp", "sigalt-cfi"} {
		t.Run(name, func(t *testing.T) {
			signal := false
			compareWithGDB(t, name, func(ts ThreadStack, i int, want []gdbstack.Frame) {
				if ts.Name != "altsig" {
					return
				}
				if want[i].Function == gdbstack.SignalFrame {
					signal = true
					if ts.Frames[i].Function != profile.SignalFrame {
						t.Errorf("frame #%d: %q, want %q", i, ts.Frames[i].Function, profile.SignalFrame)
					}
				}
				if i == len(want)-1 && (!ts.Complete || ts.Frames[len(ts.Frames)-1].Function != "clone3") {
					t.Errorf("altsig: complete %v (%v), outermost %q, want complete at clone3",
						ts.Complete, ts.Err, ts.Frames[len(ts.Frames)-1].Function)
				}
			})
			if !signal {
				t.Error("no signal frame in the altsig thread")
			}
		})
	}
}

// TestDumpNoCFINoFP: code with neither unwind tables nor frame pointers,
// with a zero in rbp, below libc's pause(). stacktop gives gdb's first two
// frames (pause, nocfi_leaf: libc's CFI finds the caller) and then cannot
// know more; the stack must say truncated, not complete (gdb itself goes
// on into garbage there).
func TestDumpNoCFINoFP(t *testing.T) {
	t.Parallel()
	needGDBOnly(t)
	tg := targets.Start(t, "nocfi")
	// The target says it is ready right after pthread_create: wait until
	// its thread sleeps (in pause, where it blocks for good).
	waitThreadSleeping(t, tg, "noinfo")
	tg.Stop()
	defer tg.Cont()
	res, gdb := dumpWithGDB(t, tg.PID(), Options{})
	found := false
	for _, ts := range res.Threads {
		if ts.Name != "noinfo" {
			continue
		}
		found = true
		want := gdb[ts.TID]
		if len(want) < 2 || len(ts.Frames) < 2 {
			t.Fatalf("stacktop %d frames, gdb %d", len(ts.Frames), len(want))
		}
		for i := range 2 {
			if ts.Frames[i].PC != want[i].PC {
				t.Errorf("frame #%d: stacktop 0x%x %s, gdb 0x%x %s", i, ts.Frames[i].PC, ts.Frames[i].Function, want[i].PC, want[i].Function)
			}
		}
		if ts.Frames[1].Function != "nocfi_leaf" {
			t.Errorf("frame #1 is %q, want nocfi_leaf", ts.Frames[1].Function)
		}
		if ts.Complete || !errors.Is(ts.Err, unwind.ErrZeroFP) {
			t.Errorf("noinfo thread: complete %v, err %v; want truncated with %v", ts.Complete, ts.Err, unwind.ErrZeroFP)
		}
	}
	if !found {
		t.Fatal("no thread named noinfo")
	}
}

// TestRefuse32Bit: a 32-bit program is refused at attach with a clear
// error (dump exits 2), not walked as if it were 64-bit.
func TestRefuse32Bit(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	targets.SkipUnlessRunnable(t, "i386")
	tg := targets.Start(t, "i386")
	res, err := Run(newTracer(t), tg.PID(), Options{})
	if !errors.Is(err, resolve.ErrNot64Bit) {
		t.Fatalf("dump of a 32-bit program: err %v, want %v", err, resolve.ErrNot64Bit)
	}
	if res != nil && len(res.Threads) > 0 {
		t.Errorf("dumped %d threads of a 32-bit program", len(res.Threads))
	}
	t.Logf("%v", err)
	if states, _ := targets.ThreadStates(tg.PID()); len(states) == 0 {
		t.Error("the 32-bit program is gone")
	}
}

// waitThreadSleeping waits until tg's thread named name is asleep (state
// S), or fails after targets.ReadyTimeout.
func waitThreadSleeping(t *testing.T, tg *targets.Target, name string) {
	t.Helper()
	deadline := time.Now().Add(targets.ReadyTimeout)
	for {
		names, err := tg.Threads()
		if err != nil {
			t.Fatal(err)
		}
		for tid, n := range names {
			if n == name {
				if st, err := procmaps.ReadStat(tg.PID(), tid); err == nil && st.State == 'S' {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %q never went to sleep", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
