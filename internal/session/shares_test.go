package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// TestBackendsAgreeOnShares records the same fixtures with the ptrace back
// end (the default) and the perf back end, whose cpu-clock samples are the
// reference for where the CPU went, and compares the share of the on-CPU
// samples of every function of the program: its total share (the samples
// whose stack holds it), what a flame graph shows. Every function's
// shares, self (the function is the leaf) and total, are logged. Why not
// self shares, nor libc's functions: a ptrace stop lands at the next
// system call of a thread that makes one sooner than the interrupt takes
// effect (docs/record.md), so the wrapper of a call made every 100 µs
// (split's clock_gettime) holds self samples of the loop around it: its
// callers' totals are unchanged.
//
// The fixtures: cpusplit, threads at 100%, 25% (5 ms busy, 15 ms asleep),
// 5% (1 ms in 20) and ~0% of a CPU, whose busy phases are shorter than a
// tick or about one, so a back end that charges what a thread ran to the
// stack the tick finds shows nanosleep; and split, one thread whose CPU
// alternates 75/25 between two functions.
//
// The two profiles are both estimates, so the tolerance is 3 points or
// 2.5 standard deviations of the difference of two binomial shares over
// their sample counts, whichever is larger; the log shows both. Sleeping
// stacks (nanosleep, futex, epoll_wait, poll at the leaf) must hold at most
// 2% of the ptrace back end's on-CPU samples, or what perf finds there
// within the tolerance: cpusplit's waker, woken 2,000 times a second,
// spends 1-2% of the process's CPU in nanosleep's wake-up path, which
// perf's cpu-clock charges to the wait call's stack too.
func TestBackendsAgreeOnShares(t *testing.T) {
	needRoot(t)
	for _, fixture := range []string{"cpusplit-fp", "split-sframe3"} {
		t.Run(fixture, func(t *testing.T) {
			tg := targets.Start(t, fixture)
			tr := ptrace.NewTracer()
			defer tr.Close()
			// Both back ends sample the same seconds of the program, side
			// by side: perf's cpu-clock counts only the time a thread
			// runs in user mode, so ptrace's stops do not shift it.
			// cpusplit's waker and main thread only wait; split has no
			// such thread.
			onlyWaits := func(tid int, name string) bool {
				return fixture == "cpusplit-fp" && (name == "waker" || tid == tg.PID())
			}
			waiting0 := waitingCPU(t, tg.PID(), onlyWaits)
			var pf shares
			var perfErr error
			perfDone := make(chan struct{})
			go func() {
				defer close(perfDone)
				pf, perfErr = recordShares(tr, tg.PID(), Perf)
			}()
			pt, err := recordShares(tr, tg.PID(), Ptrace)
			<-perfDone
			if err != nil {
				t.Fatal(err)
			}
			if errors.Is(perfErr, errNoPerf) {
				t.Skip(perfErr)
			} else if perfErr != nil {
				t.Fatal(perfErr)
			}
			waiting := waitingCPU(t, tg.PID(), onlyWaits).share(waiting0)
			compareShares(t, pt, pf, fixture)
			// A thread that only wakes and sleeps again spends its CPU
			// in the wait call: in user mode, which perf too charges to
			// the wait call's stack, and in the kernel's wake-up path,
			// which perf's user-mode cpu-clock does not see and ptrace
			// charges there too. That much is CPU the program spent
			// waiting, no error; how much it is grows with the machine's
			// load (more switches, each dearer).
			limit := max(2, pf.sleeping()+shareTolerance(pf.sleeping(), pt.total, pf.total),
				waiting+shareTolerance(waiting, pt.total, pt.total))
			t.Logf("threads that only wait used %.1f%% of the process's CPU", waiting)
			if s := pt.sleeping(); s > limit {
				t.Errorf("ptrace: sleeping stacks hold %.1f%% of the on-CPU samples (perf: %.1f%%; the waiting threads used %.1f%% of the CPU), want <= %.1f%%", s, pf.sleeping(), waiting, limit)
			}
		})
	}
}

// cpuReading is the CPU time, from schedstat, of a process's threads that
// only wait and of all its threads.
type cpuReading struct{ waiting, all uint64 }

// waitingCPU reads the CPU time of pid's threads, telling apart those
// that only wait.
func waitingCPU(t *testing.T, pid int, onlyWaits func(tid int, name string) bool) cpuReading {
	t.Helper()
	names, err := targets.ThreadNames(pid)
	if err != nil {
		t.Fatal(err)
	}
	var r cpuReading
	for tid, name := range names {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
		if err != nil {
			continue // exited
		}
		st, err := procmaps.ParseSchedstat(b)
		if err != nil {
			t.Fatal(err)
		}
		r.all += st.RunNS
		if onlyWaits(tid, name) {
			r.waiting += st.RunNS
		}
	}
	return r
}

// share is the percentage of the process's CPU since before that the
// waiting threads used.
func (r cpuReading) share(before cpuReading) float64 {
	if r.all <= before.all {
		return 0
	}
	return 100 * float64(r.waiting-before.waiting) / float64(r.all-before.all)
}

// shares are a profile's per-function shares, in percent.
type shares struct {
	backend   Backend
	total     int64 // samples (weights in periods)
	self, all map[string]float64
	module    map[string]string // each function's module, by base name
}

// errNoPerf: the perf back end cannot be opened here.
var errNoPerf = errors.New("the perf back end is not available here")

// recordShares records pid for a few seconds with back end b. It may run
// on a goroutine of its own: it reports by its error, not through t.
func recordShares(tr *ptrace.Tracer, pid int, b Backend) (shares, error) {
	s, err := Start(tr, pid, nil, [3]*os.File{}, Options{Backend: b, Rate: 199, Duration: 4 * time.Second})
	if err != nil {
		if b == Perf {
			return shares{}, fmt.Errorf("%w: %v", errNoPerf, err)
		}
		return shares{}, err
	}
	defer s.Close()
	if err := s.Engine.Run(context.Background()); err != nil {
		return shares{}, fmt.Errorf("%s: %w", b, err)
	}
	if err := s.Detach(); err != nil {
		return shares{}, fmt.Errorf("%s: detach: %w", b, err)
	}
	if s.Backend != b {
		return shares{}, fmt.Errorf("back end %s ran, want %s", s.Backend, b)
	}
	return sharesOf(b, s.Engine.Snapshot()), nil
}

func sharesOf(b Backend, p *profile.Profile) shares {
	a := p.Aggregate(0)
	sh := shares{backend: b, total: a.Total, self: map[string]float64{}, all: map[string]float64{}, module: map[string]string{}}
	for _, f := range a.Functions() {
		sh.module[f.Name] = profile.ModuleBase(f.Module)
		if a.Total > 0 {
			sh.self[f.Name] = 100 * float64(f.Self) / float64(a.Total)
			sh.all[f.Name] = 100 * float64(f.Total) / float64(a.Total)
		}
	}
	return sh
}

// sleeping is the share of samples whose leaf is a call that waits.
func (s shares) sleeping() float64 {
	var sum float64
	for name, pct := range s.self {
		if isSleepingLeaf(name) {
			sum += pct
		}
	}
	return sum
}

func isSleepingLeaf(name string) bool {
	for _, w := range []string{"nanosleep", "futex", "epoll_wait", "epoll_pwait", "poll", "select", "pause", "sigsuspend", "sigtimedwait"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// compareShares fails for every function of program whose total share
// differs by more than the tolerance between the two profiles.
func compareShares(t *testing.T, a, b shares, program string) {
	t.Helper()
	if a.total < 100 || b.total < 100 {
		t.Fatalf("too few samples to compare: %s %d, %s %d", a.backend, a.total, b.backend, b.total)
	}
	names := map[string]bool{}
	for n := range a.all {
		names[n] = true
	}
	for n := range b.all {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Slice(sorted, func(i, j int) bool { return a.all[sorted[i]]+b.all[sorted[i]] > a.all[sorted[j]]+b.all[sorted[j]] })
	t.Logf("%-28s %-15s %-15s", "function: total (self)", a.backend, b.backend)
	for _, n := range sorted {
		pa, pb := a.all[n], b.all[n]
		tol := shareTolerance((pa+pb)/2, a.total, b.total)
		t.Logf("%-28s %5.1f%% (%5.1f%%) %5.1f%% (%5.1f%%)  tolerance %.1f", n, pa, a.self[n], pb, b.self[n], tol)
		if math.Abs(pa-pb) > tol && (a.module[n] == program || b.module[n] == program) {
			t.Errorf("%s: %.1f%% with %s, %.1f%% with %s: more than %.1f points apart", n, pa, a.backend, pb, b.backend, tol)
		}
	}
	t.Logf("samples: %s %d, %s %d; sleeping stacks: %s %.1f%%, %s %.1f%%", a.backend, a.total, b.backend, b.total,
		a.backend, a.sleeping(), b.backend, b.sleeping())
}

// shareTolerance is the larger of 3 points and 2.5 standard deviations of
// the difference of two shares near pct (percent) estimated from na and nb
// samples.
func shareTolerance(pct float64, na, nb int64) float64 {
	p := pct / 100
	sd := 100 * math.Sqrt(p*(1-p)*(1/float64(na)+1/float64(nb)))
	return max(3, 2.5*sd)
}
