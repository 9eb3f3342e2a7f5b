package engine

import (
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// threadCPU reads the run time of each named thread of pid, and of the
// whole process.
func threadCPU(t *testing.T, pid int, names map[int]string) (map[string]uint64, uint64) {
	t.Helper()
	out := map[string]uint64{}
	for tid, name := range names {
		f, err := procmaps.OpenSchedstat(pid, tid)
		if err != nil {
			t.Fatal(err)
		}
		ss, err := f.Read()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = ss.RunNS
	}
	clock, err := procmaps.OpenProcessClock(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer clock.Close()
	total, err := clock.RunNS()
	if err != nil {
		t.Fatal(err)
	}
	return out, total
}

// TestEngineOnCPUWeights: on the cpusplit target (threads at 100%, 25%, 5%
// and ~0% of a CPU, the last waking 2,000 times a second), the on-CPU
// profile gives each thread the share of samples that it had of the CPU
// time, and its total is the CPU time the process used. The shares are
// compared with what the threads really ran (on a loaded machine the
// spinners get less than their nominal shares), within 8 points; the total
// within 10%.
func TestEngineOnCPUWeights(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "cpusplit-fp")
	names, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	tgt := openTarget(t, tg.PID())
	before, procBefore := threadCPU(t, tg.PID(), names)
	// A starved engine (a heavily loaded machine) ticks rarely; the run
	// lasts until it ticked 250 times, so the shares mean something.
	e, st := runEngineUntil(t, tgt, EngineOptions{Rate: 99}, 3*time.Second, 30*time.Second,
		func(e *Engine) bool { return e.Stats().Ticks >= 250 })
	after, procAfter := threadCPU(t, tg.PID(), names)
	p := e.Snapshot()
	if p.Wall {
		t.Fatal("an on-CPU profile says it is wall-clock")
	}

	samples := map[string]int64{}
	var total int64
	for tid, th := range p.Threads {
		samples[names[tid]] += th.Samples
		total += th.Samples
	}
	// Every thread counts, the main thread too (it writes the progress
	// file every 10 ms).
	var ran uint64
	for n := range after {
		ran += after[n] - before[n]
	}
	if total == 0 || ran == 0 {
		t.Fatalf("no samples (%d) or no CPU time (%d ns)", total, ran)
	}
	for _, n := range []string{"hot", "quarter", "fifth", "waker"} {
		got := 100 * float64(samples[n]) / float64(total)
		want := 100 * float64(after[n]-before[n]) / float64(ran)
		t.Logf("%-8s %5.1f%% of samples, %5.1f%% of the CPU time (%v)", n, got, want, time.Duration(after[n]-before[n]))
		if got < want-8 || got > want+8 {
			t.Errorf("%s: %.1f%% of the samples, but %.1f%% of the CPU time", n, got, want)
		}
	}
	// The nominal split (75/19/4/<=5) holds when the spinners get their CPU;
	// on a loaded machine the waker's few microseconds per wake-up are a
	// bigger share of what the process got, and the check above is the one
	// that says whether the profile is true.
	if busy := float64(after["hot"]-before["hot"]) / float64(st.Elapsed); busy >= 0.7 {
		if w := 100 * float64(samples["waker"]) / float64(total); w > 5 {
			t.Errorf("the waker has %.1f%% of the samples, want <= 5%%", w)
		}
	} else {
		t.Logf("hot got %.0f%% of a CPU (a loaded machine): the nominal split is not checked", 100*busy)
	}
	profCPU := time.Duration(total) * p.Period
	procCPU := time.Duration(procAfter - procBefore)
	t.Logf("profile %v of CPU, the process ran %v; %d stops in %d ticks (%d missed), %d failed (%v), %d gone", profCPU, procCPU, st.Stops, st.Ticks, st.MissedTicks, st.Failed, st.LastErr, st.Gone)
	if r := float64(profCPU) / float64(procCPU); r < 0.9 || r > 1.1 {
		t.Errorf("the profile holds %v of CPU time, the process used %v", profCPU, procCPU)
	}
}
