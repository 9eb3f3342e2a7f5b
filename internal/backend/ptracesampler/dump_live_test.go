package ptracesampler_test

import (
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// tracedThreads lists the threads of pid that some tracer holds.
func tracedThreads(t *testing.T, pid int) []int {
	t.Helper()
	tids, err := procmaps.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, tid := range tids {
		if st, err := procmaps.ReadStatus(pid, tid); err == nil && st.TracerPID != 0 {
			out = append(out, tid)
		}
	}
	return out
}

// A dump attaches lazily: after OpenDump only the main thread is traced,
// Threads is /proc's whole list, and each thread is seized and let go by
// Sample, so none is traced once every thread was sampled (before
// Close). With freeze, and for a stopped process (which stays stopped),
// every thread is attached at the open.
func TestOpenDumpLazy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("live ptrace tests need root (or CAP_SYS_PTRACE); CI runs them as root")
	}
	tg := targets.Start(t, "manythreads-sframe3")
	pid := tg.PID()
	all, err := procmaps.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	tr := ptrace.NewTracer()
	defer tr.Close()
	sampleAll := func(t *testing.T, d *ptracesampler.Dump) {
		t.Helper()
		tids := d.Threads()
		n := 0
		err := d.Sample(tids, func(info ptracesampler.ThreadInfo, s *backend.Sample, err error) {
			if err != nil {
				t.Errorf("thread %d: %v", info.TID, err)
				return
			}
			if s.TID != info.TID {
				t.Errorf("thread %d's call carried the sample of %d", info.TID, s.TID)
			}
			n++
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != len(tids) {
			t.Errorf("%d samples of %d threads", n, len(tids))
		}
	}

	t.Run("lazy", func(t *testing.T) {
		d, err := ptracesampler.OpenDump(tr, pid, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if got := tracedThreads(t, pid); !slices.Equal(got, []int{pid}) {
			t.Errorf("after the open %d threads traced, want the main thread only", len(got))
		}
		if got := d.Threads(); !slices.Equal(got, all) {
			t.Errorf("Threads() = %d threads, /proc lists %d", len(got), len(all))
		}
		sampleAll(t, d)
		if got := tracedThreads(t, pid); len(got) != 0 {
			t.Errorf("%d threads still traced after each was sampled", len(got))
		}
		if got := d.Threads(); !slices.Equal(got, all) {
			t.Errorf("Threads() after the sampling = %d threads, want /proc's %d", len(got), len(all))
		}
	})
	t.Run("freeze", func(t *testing.T) {
		d, err := ptracesampler.OpenDump(tr, pid, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if got := tracedThreads(t, pid); len(got) != len(all) {
			t.Errorf("after the open %d threads traced, want all %d", len(got), len(all))
		}
		if err := d.Freeze(); err != nil {
			t.Fatal(err)
		}
		sampleAll(t, d)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		tg.Stop()
		defer tg.Cont()
		d, err := ptracesampler.OpenDump(tr, pid, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if got := tracedThreads(t, pid); len(got) != len(all) {
			t.Errorf("stopped: after the open %d threads traced, want all %d", len(got), len(all))
		}
		sampleAll(t, d)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		// A thread detached from its ptrace stop goes back to its group-
		// stop once it runs again (state R until then: on a loaded
		// machine, milliseconds); one left running never does.
		var states map[int]byte
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			if states, err = targets.ThreadStates(pid); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(slices.Collect(maps.Values(states)), func(st byte) bool { return st != 'T' }) || time.Now().After(deadline) {
				break
			}
		}
		for tid, st := range states {
			if st != 'T' {
				t.Errorf("thread %d state %c 2 s after the dump, want T", tid, st)
			}
		}
	})
	if got := tracedThreads(t, pid); len(got) != 0 {
		t.Errorf("%d threads traced at the end", len(got))
	}
}
