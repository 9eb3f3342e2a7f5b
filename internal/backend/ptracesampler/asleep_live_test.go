package ptracesampler_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// A stop tells a thread asleep in a system call from one on a CPU
// (ptrace.Sample.Asleep), which keeps sleeping stacks out of on-CPU
// profiles: libcblock's threads blocked in pause, nanosleep, read on a
// pipe, futex (a condition variable, a join) and poll are asleep; its
// threads looping in the vDSO and through the PLT are not. amd64 only: on
// arm64 the registers do not tell, on s390x only restart codes do.
func TestStopTellsAsleep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("live ptrace tests need root (or CAP_SYS_PTRACE); CI runs them as root")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the registers tell an interrupted system call on amd64")
	}
	tg := targets.Start(t, "libcblock-sframe3")
	tr := ptrace.NewTracer()
	defer tr.Close()
	p, err := tr.Attach(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Detach()
	for name, asleep := range map[string]bool{
		"pause": true, "nanosleep": true, "readpipe": true, "condwait": true, "join": true, "poll": true,
		"vdso": false, "pltloop": false,
	} {
		tid := tg.ThreadNamed(t, name)
		// Several stops each: a looping thread must never look asleep,
		// a blocked one always.
		for range 5 {
			if asleep {
				// Back in its wait first: resumed from the last stop, a
				// thread restarts the call only when it next gets a CPU,
				// which on a loaded machine can be after the next stop.
				waitSleeping(t, tg.PID(), tid)
			}
			s, err := p.Sample(tid, 256, 0)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if s.Asleep != asleep {
				t.Errorf("%s (thread %d) at pc %#x: Asleep %v, want %v", name, tid, s.Regs.PC, s.Asleep, asleep)
				break
			}
		}
	}
}

// waitSleeping waits up to 5 s for thread tid to be in an interruptible
// sleep (S in its /proc stat).
func waitSleeping(t *testing.T, pid, tid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st, err := procmaps.ReadThreadState(pid, tid); err == nil && st == 'S' {
			return
		}
	}
	t.Fatalf("thread %d not back in its wait after 5 s", tid)
}
