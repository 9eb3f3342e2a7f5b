//go:build linux

package ptrace

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// batchAll runs SampleBatch over every thread of p and returns each
// thread's sample (copied) or error, failing the test unless every thread
// got exactly one call with its own TID.
func batchAll(t *testing.T, p *Process, o BatchOptions) (tids []int, samples []Sample, errs []error) {
	t.Helper()
	tids = toSample(t, p)
	samples = make([]Sample, len(tids))
	errs = make([]error, len(tids))
	calls := make([]int, len(tids))
	err := p.SampleBatch(tids, o, func(i int, s *Sample, err error) bool {
		calls[i]++
		errs[i] = err
		if err == nil {
			samples[i] = *s
			samples[i].Stack = append([]byte(nil), s.Stack...)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range calls {
		if n != 1 {
			t.Errorf("thread %d: %d calls, want 1", tids[i], n)
		}
		if errs[i] == nil && samples[i].TID != tids[i] {
			t.Errorf("call for thread %d carried the sample of %d", tids[i], samples[i].TID)
		}
	}
	return tids, samples, errs
}

// stoppedThreads lists the threads of pid in a ptrace stop (state t).
func stoppedThreads(t testing.TB, pid int) []int {
	t.Helper()
	var out []int
	for _, tid := range tracedThreads(t, pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if f[0] == "t" {
			out = append(out, tid)
		}
	}
	return out
}

// waitNoneStopped polls until no thread of pid is in a ptrace stop: a
// stop no sample waits for must be resumed by the tracer on its own.
func waitNoneStopped(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := stoppedThreads(t, pid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads %v still in a ptrace stop 3 s after the batch", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitNoSignalQueued waits (10 s at most) until no signal is pending for
// any thread of pid, shared or thread-directed (/proc status ShdPnd and
// SigPnd).
func waitNoSignalQueued(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pending := ""
		tids, _ := procmaps.Threads(pid)
		for _, tid := range tids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				k, v, _ := strings.Cut(line, ":")
				if (k == "ShdPnd" || k == "SigPnd") && strings.Trim(strings.TrimSpace(v), "0") != "" {
					pending = fmt.Sprintf("thread %d %s %s", tid, k, strings.TrimSpace(v))
				}
			}
		}
		if pending == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("signals still queued 10 s after the batches: %s", pending)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A batch of a few hundred threads, most asleep in the kernel (libc's
// nanosleep, a raw futex wait, a raw read), a few spinning: every thread
// is sampled exactly once with registers of its own stack, each stop is
// accounted (Stopped within Total), the threads' stops overlap (the sum
// of their interrupt-to-resume times exceeds the batch's wall time, which
// sampling one thread after another cannot do), and none stays stopped.
func TestBatchOverlapsStops(t *testing.T) {
	const n = 300
	tg := startTarget(t, "many", fmt.Sprint(n), "2")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	maps := readMaps(t, tg.pid)
	start := time.Now()
	tids, samples, errs := batchAll(t, p, BatchOptions{StackWindow: 4096})
	wall := time.Since(start)
	if len(tids) != n+1 {
		t.Fatalf("%d threads traced, want %d", len(tids), n+1)
	}
	var sum, longest time.Duration
	for i, s := range samples {
		if errs[i] != nil {
			t.Errorf("thread %d: %v", tids[i], errs[i])
			continue
		}
		if s.Stopped <= 0 || s.Stopped > s.Total {
			t.Errorf("thread %d: stopped %v, total %v: the stop is not accounted within the sample", tids[i], s.Stopped, s.Total)
		}
		m, ok := findMapping(maps, s.Regs.SP())
		if !ok || !strings.HasPrefix(m.perms, "rw") {
			t.Errorf("thread %d: SP %#x is in no writable mapping", tids[i], s.Regs.SP())
		}
		if len(s.Stack) == 0 {
			t.Errorf("thread %d: no stack bytes (%v)", tids[i], s.StackErr)
		}
		sum += s.Total
		longest = max(longest, s.Stopped)
	}
	if sum <= wall {
		t.Errorf("the threads' interrupt-to-resume times add up to %v in a batch of %v: their stops did not overlap", sum, wall)
	}
	t.Logf("%d threads in %v; interrupt-to-resume times sum to %v; longest stop %v", len(tids), wall, sum, longest)
	detachUntraced(t, p, tg.pid)
}

// Twenty spinning threads per CPU: a runnable thread stops only when the
// scheduler gives it a CPU, so a short deadline leaves some not taken.
// Each thread still gets one answer; threads not taken are left running
// and their late interrupt stops are resumed by the tracer (none stays
// stopped, none is mistaken for a later sample's stop: the next batches
// sample every thread on its own stack), and detach leaves the process
// untraced.
func TestBatchDeadline(t *testing.T) {
	spinners := 20 * runtime.NumCPU()
	tg := startTarget(t, "spin", fmt.Sprint(spinners))
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	maps := readMaps(t, tg.pid)
	notTaken := 0
	for round := 0; round < 20; round++ {
		start := time.Now()
		tids, samples, errs := batchAll(t, p, BatchOptions{StackWindow: 1024, Deadline: start.Add(time.Millisecond)})
		for i, err := range errs {
			switch {
			case errors.Is(err, ErrNotTaken):
				notTaken++
			case err != nil:
				t.Fatalf("round %d thread %d: %v", round, tids[i], err)
			default:
				if _, ok := findMapping(maps, samples[i].Regs.SP()); !ok {
					t.Errorf("round %d thread %d: SP %#x in no mapping", round, tids[i], samples[i].Regs.SP())
				}
			}
		}
	}
	t.Logf("%d of %d thread samples not taken within 1 ms", notTaken, 20*(spinners))
	waitNoneStopped(t, tg.pid)
	// Without a deadline every thread is taken, late stops or not.
	tids, samples, errs := batchAll(t, p, BatchOptions{StackWindow: 1024})
	for i, err := range errs {
		if err != nil {
			t.Errorf("thread %d without deadline: %v", tids[i], err)
		} else if _, ok := findMapping(maps, samples[i].Regs.SP()); !ok {
			t.Errorf("thread %d: SP %#x in no mapping", tids[i], samples[i].Regs.SP())
		}
	}
	// A deadline already past takes nothing, interrupts no thread and
	// leaves every thread running.
	sent := tr.batch.interrupts
	_, _, errs = batchAll(t, p, BatchOptions{StackWindow: 1024, Deadline: time.Now().Add(-time.Second)})
	for i, err := range errs {
		if !errors.Is(err, ErrNotTaken) {
			t.Errorf("thread %d past the deadline: %v, want ErrNotTaken", tids[i], err)
		}
	}
	if n := tr.batch.interrupts - sent; n != 0 {
		t.Errorf("a batch past its deadline sent %d interrupts", n)
	}
	detachUntraced(t, p, tg.pid)
	if s := procState(t, tg.pid); s != 'R' && s != 'S' {
		t.Errorf("target in state %c after detach, want running", s)
	}
}

// A cancelled batch stops at once: what was not sampled is ErrNotTaken.
func TestBatchCancel(t *testing.T) {
	tg := startTarget(t, "spin", fmt.Sprint(10*runtime.NumCPU()))
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	cancel := make(chan struct{})
	close(cancel)
	sent := tr.batch.interrupts
	tids, _, errs := batchAll(t, p, BatchOptions{StackWindow: 1024, Cancel: cancel})
	if n := tr.batch.interrupts - sent; n != 0 {
		t.Errorf("a cancelled batch sent %d interrupts", n)
	}
	taken := 0
	for i, err := range errs {
		switch {
		case err == nil:
			taken++
		case !errors.Is(err, ErrNotTaken):
			t.Errorf("thread %d: %v", tids[i], err)
		}
	}
	if taken == len(tids) {
		t.Errorf("a cancelled batch sampled all %d threads", taken)
	}
	detachUntraced(t, p, tg.pid)
}

// Signals sent while batches sample the process arrive exactly once:
// signal-delivery-stops of threads in a batch are sampled and resumed
// with their signal, those of other threads are resumed by the tracer
// while the batch runs.
func TestSignalsDuringBatches(t *testing.T) {
	tg := startTarget(t, "signals")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	stop := make(chan struct{})
	var batches atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tids := p.Threads()
			err := p.SampleBatch(tids, BatchOptions{StackWindow: 1024, Deadline: time.Now().Add(5 * time.Millisecond)},
				func(i int, s *Sample, err error) bool {
					if err != nil && !errors.Is(err, ErrNotTaken) {
						t.Errorf("thread %d: %v", tids[i], err)
					}
					return true
				})
			if err != nil {
				t.Error(err)
				return
			}
			batches.Add(1)
		}
	}()
	const nRT = 3000
	for i := 0; i < nRT; i++ {
		if err := syscall.Kill(tg.pid, rtsig); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	waitNoneStopped(t, tg.pid)
	// On a loaded machine the target may not have run every handler yet:
	// a signal still queued, or resumed into a handler frame the thread
	// has not run yet, is late, not lost, and SIGTERM (lower, so taken
	// first) would end the count before it. (Seen at load average 25:
	// rt=2999 in about one run of eight, before this wait as after it.)
	waitNoSignalQueued(t, tg.pid)
	time.Sleep(500 * time.Millisecond)
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
	syscall.Kill(tg.pid, syscall.SIGTERM)
	got := strings.TrimSpace(readAllLine(t, tg.out))
	if want := fmt.Sprintf("usr1=0 rt=%d", nRT); got != want {
		t.Fatalf("target counted %q, want %q", got, want)
	}
	t.Logf("%d batches while signalling", batches.Load())
}

// TestSignalDuringEach: a signal sent to a thread outside the batch while
// each is still busy with a sample is delivered then, not once each
// returns: each runs off the tracer thread, which resumes the thread's
// signal-delivery-stop meanwhile.
func TestSignalDuringEach(t *testing.T) {
	tg := startTarget(t, "signals")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	var spinner int
	for _, tid := range p.Threads() {
		if tid != tg.pid {
			spinner = tid
		}
	}
	if spinner == 0 {
		t.Fatal("no second thread")
	}
	acked := make(chan error, 1)
	go func() {
		b, err := tg.out.ReadByte()
		if err == nil && b != 'u' {
			err = fmt.Errorf("target wrote %q, want 'u'", b)
		}
		acked <- err
	}()
	var during time.Duration
	err := p.SampleBatch([]int{spinner}, BatchOptions{StackWindow: 1024}, func(i int, s *Sample, err error) bool {
		if err != nil {
			t.Errorf("sample: %v", err)
		}
		// The main thread's handler writes 'u' once SIGUSR1 reaches it.
		start := time.Now()
		if err := syscall.Tgkill(tg.pid, tg.pid, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-acked:
			if err != nil {
				t.Error(err)
			}
			during = time.Since(start)
		case <-time.After(3 * time.Second):
			t.Error("SIGUSR1 was not delivered while each ran (3 s)")
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGUSR1 delivered %v after it was sent, while each ran", during)
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
	syscall.Kill(tg.pid, syscall.SIGTERM)
	if got := strings.TrimSpace(readAllLine(t, tg.out)); got != "usr1=1 rt=0" {
		t.Fatalf("target counted %q, want usr1=1 rt=0", got)
	}
}

// releaseAll samples every thread of p with Release until none is left
// traced (threads created meanwhile are traced from birth and sampled in
// the next round), and returns how many samples it took.
func releaseAll(t *testing.T, p *Process) int {
	t.Helper()
	n := 0
	for round := 0; ; round++ {
		tids := p.Threads()
		if len(tids) == 0 {
			return n
		}
		if round == 100 {
			t.Fatalf("threads %v still traced after 100 rounds of Release batches", tids)
		}
		err := p.SampleBatch(tids, BatchOptions{StackWindow: 1024, Release: true}, func(i int, s *Sample, err error) bool {
			switch {
			case err == nil:
				n++
			case !errors.Is(err, ErrThreadExited):
				t.Errorf("thread %d: %v", tids[i], err)
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A Release batch detaches each thread at the stop of its sample: right
// after it, before Detach, no thread of the process is traced or stopped,
// the spinners run on, the Process lists no thread and a released thread
// cannot be sampled again (ErrDetached); Detach has nothing left to do.
func TestBatchRelease(t *testing.T) {
	const n = 300
	tg := startTarget(t, "many", fmt.Sprint(n), "2")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	all := p.Threads()
	tids, _, errs := batchAll(t, p, BatchOptions{StackWindow: 4096, Release: true})
	if len(tids) != n+1 {
		t.Fatalf("%d threads traced, want %d", len(tids), n+1)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("thread %d: %v", tids[i], err)
		}
	}
	checkUntraced(t, tg.pid)
	if left := stoppedThreads(t, tg.pid); len(left) > 0 {
		t.Errorf("threads %v in a ptrace stop after the batch", left)
	}
	if left := p.Threads(); len(left) != 0 {
		t.Errorf("Threads() = %d threads after every thread was released", len(left))
	}
	if _, err := p.Sample(all[0], 1024, 0); !errors.Is(err, ErrDetached) {
		t.Errorf("sampling a released thread: %v, want ErrDetached", err)
	}
	before := cpuTicks(t, tg.pid)
	deadline := time.Now().Add(5 * time.Second)
	for cpuTicks(t, tg.pid) == before {
		if time.Now().After(deadline) {
			t.Fatal("the spinners did not run after their release")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sent := tr.batch.interrupts
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	if k := tr.batch.interrupts - sent; k != 0 {
		t.Errorf("Detach after a Release batch interrupted %d threads", k)
	}
	checkUntraced(t, tg.pid)
}

// A process stopped before the attach stays stopped through a Release
// batch: each thread is detached back into its group-stop (state T), and a
// SIGCONT resumes it.
func TestBatchReleaseStopped(t *testing.T) {
	tg := startTarget(t, "spin", "3")
	syscall.Kill(tg.pid, syscall.SIGSTOP)
	waitState(t, tg.pid, "T")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	before := cpuTicks(t, tg.pid)
	if got := releaseAll(t, p); got != 3 {
		t.Errorf("%d samples, want 3", got)
	}
	checkUntraced(t, tg.pid)
	time.Sleep(50 * time.Millisecond)
	for _, tid := range mustThreads(t, tg.pid) {
		if st, _ := statField(t, fmt.Sprintf("/proc/%d/task/%d/stat", tg.pid, tid)); st != 'T' {
			t.Errorf("thread %d state %c after its release, want T", tid, st)
		}
	}
	if after := cpuTicks(t, tg.pid); after != before {
		t.Errorf("stopped process ran: %d -> %d ticks", before, after)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(tg.pid, syscall.SIGCONT)
	waitState(t, tg.pid, "RS")
}

// Signals sent while Release batches run are all delivered: a storm of
// them at any moment, and in each round one that leaves a thread in a
// signal-delivery-stop nobody has seen yet (the tracer thread is kept
// busy meanwhile), which the batch then finds at the thread's interrupt:
// that thread is detached with its signal.
func TestBatchReleaseSignals(t *testing.T) {
	tg := startTarget(t, "signals")
	tr := NewTracer()
	defer tr.Close()
	const minRounds = 20
	sent := rtStorm(t, tg.pid)
	rounds := 0
	for done := false; !done || rounds < minRounds; rounds++ {
		select {
		case <-sent:
			done = true
		default:
		}
		p := attach(t, tr, tg.pid)
		var spinner int
		for _, tid := range p.Threads() {
			if tid != tg.pid {
				spinner = tid
			}
		}
		// With stop notifications off (a batch's) and no drain after, only
		// the batch (or, rarely, the tracer's safety poll) sees the stop.
		tr.do(func() { tr.stopBatch(func() { signalStop(t, tg.pid, spinner, rtsig) }, func() bool { return true }) })
		releaseAll(t, p)
		if err := p.Detach(); err != nil {
			t.Fatal(err)
		}
	}
	checkUntraced(t, tg.pid)
	waitNoSignalQueued(t, tg.pid)
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(tg.pid, syscall.SIGTERM)
	got := strings.TrimSpace(readAllLine(t, tg.out))
	if want := fmt.Sprintf("usr1=0 rt=%d", stormRT+rounds); got != want {
		t.Fatalf("target counted %q, want %q", got, want)
	}
	if n := tr.batch.releasedSignals; n < int64(rounds/2) {
		t.Errorf("%d threads released with their signal in %d rounds, want about one a round", n, rounds)
	}
	t.Logf("%d attach-release rounds; %d threads released with their signal", rounds, tr.batch.releasedSignals)
}

// signalStop sends sig to thread tid and waits until it is in its
// signal-delivery-stop (a traced thread's signal stops it first).
func signalStop(t *testing.T, pid, tid int, sig syscall.Signal) {
	if err := syscall.Tgkill(pid, tid, sig); err != nil {
		t.Error(err)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, _ := procmaps.ReadThreadState(pid, tid); st == 't' {
			return
		}
		if time.Now().After(deadline) {
			t.Error("the signalled thread did not enter its signal-delivery-stop")
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Threads created during Release batches are traced from birth (their
// parent is, until its sample) and released in turn: none stays traced.
func TestBatchReleaseChurn(t *testing.T) {
	tg := startTarget(t, "churn")
	tr := NewTracer()
	defer tr.Close()
	for i := 0; i < 20; i++ {
		p := attach(t, tr, tg.pid)
		releaseAll(t, p)
		if err := p.Detach(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntraced(t, tg.pid)
}

func mustThreads(t testing.TB, pid int) []int {
	t.Helper()
	tids, err := procmaps.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	return tids
}
