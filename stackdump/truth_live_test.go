package stackdump

import (
	"testing"
	"time"

	"stacktop/internal/targets"
)

// TestStoppedProcessShowsT: a process stopped by SIGSTOP shows state T (as
// ps does without stacktop), not t, the tracing stop it is in while
// traced; and it stays stopped.
func TestStoppedProcessShowsT(t *testing.T) {
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
	// Detaching from a thread in group-stop lets it run for a moment
	// before it stops again (the kernel re-enters the stop): wait for it.
	deadline := time.Now().Add(2 * time.Second)
	for {
		states, err := targets.ThreadStates(tg.PID())
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, s := range states {
			if s != 'T' {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the dump, threads not stopped: %v", states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
