package session

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
)

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (ptrace and perf events on another process)")
	}
}

// TestBackends runs one session per back end on the cpusplit target,
// sampling only its "hot" thread, and checks which back end ran, that
// samples came from that thread only, and that Detach leaves no thread
// traced.
func TestBackends(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "cpusplit-fp")
	hot := tg.ThreadNamed(t, "hot")
	tr := ptrace.NewTracer()
	defer tr.Close()
	for _, b := range []Backend{Ptrace, Perf, Auto} {
		t.Run(string(b), func(t *testing.T) {
			s, err := Start(tr, tg.PID(), nil, [3]*os.File{}, Options{Backend: b, Rate: 199, TIDs: []int{hot},
				Duration: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := b
			if b == Auto {
				want = Perf // root may open perf events
			}
			if s.Backend != want {
				t.Errorf("back end %q ran, want %q (fallback: %s)", s.Backend, want, s.Fallback)
			}
			if err := s.Engine.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := s.Detach(); err != nil {
				t.Errorf("detach: %v", err)
			}
			prof := s.Engine.Snapshot()
			if prof.Samples == 0 {
				t.Fatalf("no samples: %+v", s.Engine.Stats())
			}
			for _, th := range prof.Threads {
				if th.TID != hot {
					t.Errorf("thread %d (%s) sampled, only %d (hot) asked", th.TID, th.Name, hot)
				}
			}
			names, err := tg.Threads()
			if err != nil {
				t.Fatal(err)
			}
			for tid := range names {
				if st, err := procmaps.ReadStatus(tg.PID(), tid); err == nil && st.TracerPID != 0 {
					t.Errorf("thread %d still traced by %d after Detach", tid, st.TracerPID)
				}
			}
		})
	}
}

// TestIdlePerfRefused: a wall-clock profile cannot come from perf's timer.
func TestIdlePerfRefused(t *testing.T) {
	_, err := Start(nil, os.Getpid(), nil, [3]*os.File{}, Options{Backend: Perf, Idle: true})
	if !errors.Is(err, ErrIdlePerf) {
		t.Fatalf("Start(perf, idle) = %v, want ErrIdlePerf", err)
	}
}

func TestParseBackend(t *testing.T) {
	for _, s := range []string{"ptrace", "perf", "auto"} {
		if b, err := ParseBackend(s); err != nil || string(b) != s {
			t.Errorf("ParseBackend(%q) = %q, %v", s, b, err)
		}
	}
	if _, err := ParseBackend("ebpf"); err == nil {
		t.Error("ParseBackend(ebpf) accepted")
	}
}
