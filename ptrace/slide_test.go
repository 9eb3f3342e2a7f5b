//go:build linux

package ptrace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/regs"
)

// A sliding batch (Overlap, as dump runs it) samples every thread of a
// 300-thread process exactly once, carries threads in flight from one
// window into the next, releases every thread, and runs its windows
// under SCHED_FIFO where the kernel allows it, leaving the tracer thread
// at its normal policy afterwards. Lazily attached, it seizes every
// thread but the main one itself, and polls with one wait for any tracee.
func TestSlideBatch(t *testing.T) { forModes(t, testSlideBatch) }

func testSlideBatch(t *testing.T, lazy bool) {
	const n = 300
	tg, tr, p := manyThreads(t, lazy, fmt.Sprint(n), "2")
	carried, rtWindows := tr.batch.carried, tr.realtimeWindows
	// Whether a window ends with threads still in flight depends on how
	// fast their stops come: on a loaded machine or a quick one, a batch
	// may not carry any. Up to three batches, each on a new attach.
	for try := 1; ; try++ {
		carriedBefore := tr.batch.carried
		slideBatchOnce(t, tr, p, lazy, n)
		if tr.batch.carried > carriedBefore {
			break
		}
		if try == 3 {
			t.Errorf("no window of %d threads carried its threads in flight into the next, in %d batches", n+1, try)
			break
		}
		if err := p.Detach(); err != nil {
			t.Fatalf("Detach: %v", err)
		}
		p = attachIn(t, tr, tg.pid, lazy)
	}
	checkUntraced(t, tg.pid)
	switch {
	case tr.realtimeWindows > rtWindows:
		policy := tracerPolicy(t, tr)
		if policy != schedOther {
			t.Errorf("tracer thread's policy after the batch: %d, want SCHED_OTHER", policy)
		}
	case !tr.realtimeDenied:
		t.Error("no window ran under SCHED_FIFO, and the kernel did not refuse it")
	default:
		t.Log("SCHED_FIFO refused here: windows ran at the normal policy")
	}
	t.Logf("%d windows carried threads in flight, %d under SCHED_FIFO", tr.batch.carried-carried, tr.realtimeWindows-rtWindows)
}

// slideBatchOnce samples every thread of p once with a sliding batch that
// releases them, and checks that each was sampled and how it was seized.
func slideBatchOnce(t *testing.T, tr *Tracer, p *Process, lazy bool, n int) {
	t.Helper()
	seizes, anyPolls := tr.batch.seizes, tr.batch.anyPolls
	tids, _, errs := batchAll(t, p, BatchOptions{StackWindow: 4096, Release: true, Overlap: true})
	if lazy {
		if k := tr.batch.seizes - seizes; k != int64(n) {
			t.Errorf("the batch seized %d threads, want %d (all but the main thread)", k, n)
		}
		if tr.batch.anyPolls == anyPolls {
			t.Error("no poll round waited for any tracee")
		}
	} else if tr.batch.seizes != seizes || tr.batch.anyPolls != anyPolls {
		t.Error("a batch of a process attached whole seized threads or waited for any tracee")
	}
	if len(tids) != n+1 {
		t.Fatalf("%d threads traced, want %d", len(tids), n+1)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("thread %d: %v", tids[i], err)
		}
	}
}

// tracerPolicy reads the scheduling policy of tr's thread (field 41 of
// its /proc stat).
func tracerPolicy(t *testing.T, tr *Tracer) int {
	t.Helper()
	var tid int
	tr.do(func() { tid = unix.Gettid() })
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
	var policy int
	fmt.Sscan(f[41-3], &policy)
	return policy
}

// While the caller is slow with a window's samples, the tracer holds no
// thread: it does not carry threads in flight into a window whose slots
// the caller still reads, lets the window's threads stop and go, and
// waits with none stopped. Checked from inside the caller's first call,
// which watches the target for 200 ms: no thread may be seen in a ptrace
// stop in three polls in a row (10 ms and more).
func TestSlideSlowCaller(t *testing.T) { forModes(t, testSlideSlowCaller) }

func testSlideSlowCaller(t *testing.T, lazy bool) {
	const n = 200
	tg, _, p := manyThreads(t, lazy, fmt.Sprint(n), "2")
	first := true
	err := p.SampleBatch(toSample(t, p), BatchOptions{StackWindow: 4096, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool {
			if !first {
				return true
			}
			first = false
			seen := map[int]int{} // polls in a row that found the thread stopped
			for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
				now := map[int]int{}
				for _, tid := range stoppedThreads(t, tg.pid) {
					if now[tid] = seen[tid] + 1; now[tid] == 3 {
						t.Errorf("thread %d held stopped while the caller held up the batch", tid)
					}
				}
				seen = now
				time.Sleep(5 * time.Millisecond)
			}
			return true
		})
	if err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
}

// A sliding batch that each ends early stops there: the threads in flight
// are let go (none stays stopped), the threads not sampled stay traced
// and running (lazily attached: untraced, but for those seized in
// flight), and Detach then leaves the process untraced.
func TestSlideEndsEarly(t *testing.T) { forModes(t, testSlideEndsEarly) }

func testSlideEndsEarly(t *testing.T, lazy bool) {
	const n = 200
	tg, _, p := manyThreads(t, lazy, fmt.Sprint(n), "2")
	calls := 0
	err := p.SampleBatch(toSample(t, p), BatchOptions{StackWindow: 4096, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool {
			calls++
			return calls < 50
		})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 50 {
		t.Errorf("each was called %d times after it returned false at the 50th", calls)
	}
	waitNoneStopped(t, tg.pid)
	if lazy {
		// Only the threads of the windows under way were seized.
		if left := len(tracedThreads(t, tg.pid)); left > 3*slideInFlight+1 {
			t.Errorf("%d threads traced after 50 of %d were released: more than were in flight", left, n+1)
		}
	} else if left := len(p.Threads()); left == 0 || left > n+1-50 {
		t.Errorf("%d threads still traced after 50 of %d were released", left, n+1)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
}

// DisableRealtime keeps windows at the normal policy.
func TestDisableRealtime(t *testing.T) {
	DisableRealtime()
	defer realtimeOff.Store(false)
	_, tr, p := manyThreads(t, false, "20", "1")
	before := tr.realtimeWindows
	batchAll(t, p, BatchOptions{StackWindow: 4096, Overlap: true})
	if k := tr.realtimeWindows - before; k != 0 {
		t.Errorf("%d windows under SCHED_FIFO after DisableRealtime", k)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
}

// The next window never rewrites the samples the caller still reads: with
// a caller slower than the tracer, every sample's stack is the copy its
// WindowAt asked for (a slot set prepared again under the caller gave
// most samples the slot's whole, stale buffer).
func TestSlideSamplesIntact(t *testing.T) { forModes(t, testSlideSamplesIntact) }

func testSlideSamplesIntact(t *testing.T, lazy bool) {
	tg, _, p := manyThreads(t, lazy, "200", "2")
	bad, calls := 0, 0
	err := p.SampleBatch(toSample(t, p), BatchOptions{StackWindow: 4096, MaxWindow: 4096,
		WindowAt: func(int, *regs.Set) int { return 256 }, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool {
			calls++
			time.Sleep(300 * time.Microsecond) // the tracer starts the next window meanwhile
			if err == nil && len(s.Stack) > 256 {
				bad++
			}
			return true
		})
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Errorf("%d of %d samples' stacks were changed under each", bad, calls)
	}
	checkUntraced(t, tg.pid)
}

// runBounded runs fn and fails the test if it does not return within 10 s
// (a hang); a panic in fn is returned.
func runBounded(t *testing.T, fn func()) (panicked any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("hung")
		return nil
	}
}

// A panic on the tracer thread (here in WindowAt) reaches the caller of a
// sliding batch, and no thread stays stopped or traced after Detach.
func TestSlideTracerPanic(t *testing.T) { forModes(t, testSlideTracerPanic) }

func testSlideTracerPanic(t *testing.T, lazy bool) {
	tg, _, p := manyThreads(t, lazy, "50", "1")
	got := runBounded(t, func() {
		p.SampleBatch(toSample(t, p), BatchOptions{StackWindow: 4096, Overlap: true,
			WindowAt: func(int, *regs.Set) int { panic("boom") }},
			func(int, *Sample, error) bool { return true })
	})
	if got != "boom" {
		t.Errorf("SampleBatch's panic: %v, want boom", got)
	}
	detachUntraced(t, p, tg.pid)
}

// A sliding batch on a closed Tracer returns ErrTracerClosed.
func TestSlideTracerClosed(t *testing.T) { forModes(t, testSlideTracerClosed) }

func testSlideTracerClosed(t *testing.T, lazy bool) {
	tg := startTarget(t, "many", "5", "1")
	tr := NewTracer()
	p := attachIn(t, tr, tg.pid, lazy)
	tids := toSample(t, p)
	tr.Close()
	var err error
	runBounded(t, func() {
		err = p.SampleBatch(tids, BatchOptions{StackWindow: 4096, Overlap: true},
			func(int, *Sample, error) bool { return true })
	})
	if !errors.Is(err, ErrTracerClosed) {
		t.Errorf("SampleBatch on a closed Tracer: %v, want ErrTracerClosed", err)
	}
	checkUntraced(t, tg.pid)
}

// manyThreads starts the "many" target (n threads, spinners of them
// spinning) and attaches a Tracer (lazily: AttachLazy), closed when the
// test ends.
func manyThreads(t *testing.T, lazy bool, n, spinners string) (*target, *Tracer, *Process) {
	t.Helper()
	tg := startTarget(t, "many", n, spinners)
	tr := NewTracer()
	t.Cleanup(tr.Close)
	return tg, tr, attachIn(t, tr, tg.pid, lazy)
}

// forModes runs a slide test with the process attached whole (Attach)
// and lazily (AttachLazy), the two ways a dump attaches.
func forModes(t *testing.T, test func(t *testing.T, lazy bool)) {
	t.Run("eager", func(t *testing.T) { test(t, false) })
	t.Run("lazy", func(t *testing.T) { test(t, true) })
}

// attachIn attaches pid with Attach, or with lazy AttachLazy, which must
// then attach lazily.
func attachIn(t testing.TB, tr *Tracer, pid int, lazy bool) *Process {
	t.Helper()
	if !lazy {
		return attach(t, tr, pid)
	}
	p, err := tr.AttachLazy(pid)
	if err != nil {
		t.Fatalf("AttachLazy(%d): %v", pid, err)
	}
	if !p.Lazy() {
		t.Fatalf("AttachLazy(%d) attached every thread", pid)
	}
	if got := p.Threads(); len(got) != 1 || got[0] != pid {
		t.Fatalf("AttachLazy(%d) traces %v, want the main thread only", pid, got)
	}
	return p
}

// toSample lists the threads a batch of p is to sample: the traced
// ones, or lazily all of /proc's.
func toSample(t testing.TB, p *Process) []int {
	t.Helper()
	if !p.Lazy() {
		return p.Threads()
	}
	tids, err := p.ListThreads()
	if err != nil {
		t.Fatal(err)
	}
	return tids
}

// detachUntraced checks that no thread of pid is left in a ptrace stop,
// detaches p, and checks that the process is untraced.
func detachUntraced(t *testing.T, p *Process, pid int) {
	t.Helper()
	waitNoneStopped(t, pid)
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, pid)
}

// A slide that runs longer than slideYieldEvery gives its goroutine to
// the Go scheduler, at windows that carried no thread in flight, and
// still samples and lets go of every thread once.
func TestSlideYields(t *testing.T) { forModes(t, testSlideYields) }

func testSlideYields(t *testing.T, lazy bool) {
	defer func(d time.Duration) { slideYieldEvery = d }(slideYieldEvery)
	slideYieldEvery = 200 * time.Microsecond
	const n = 300
	tg, tr, p := manyThreads(t, lazy, fmt.Sprint(n), "2")
	yields := tr.batch.yields
	tids, _, errs := batchAll(t, p, BatchOptions{StackWindow: 4096, Release: true, Overlap: true})
	if len(tids) != n+1 {
		t.Fatalf("%d threads traced, want %d", len(tids), n+1)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("thread %d: %v", tids[i], err)
		}
	}
	if tr.batch.yields == yields {
		t.Errorf("a slide over %d threads never yielded (every %v)", n+1, slideYieldEvery)
	}
	checkUntraced(t, tg.pid)
	t.Logf("%d yields", tr.batch.yields-yields)
}

// A slide whose tracer waits for a slow caller (parking its goroutine,
// which resets the runtime's preemption clock) between every window never
// runs slideYieldEvery without a scheduling point: it need not yield, nor
// end windows without carrying for it. (Review of 815787d: yielded is
// reset only by the Gosched, so after slideYieldEvery of wall time every
// window yielded.)
func TestSlideNoYieldAfterCallerWait(t *testing.T) {
	defer func(d time.Duration) { slideYieldEvery = d }(slideYieldEvery)
	slideYieldEvery = 20 * time.Millisecond
	const n = 100
	_, tr, p := manyThreads(t, false, fmt.Sprint(n), "0")
	yields := tr.batch.yields
	tids := toSample(t, p)
	err := p.SampleBatch(tids, BatchOptions{StackWindow: 4096, Release: true, Overlap: true}, func(i int, s *Sample, err error) bool {
		time.Sleep(time.Millisecond) // a slow caller: the tracer waits for it after each window
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine can preempt the tracer thread inside one window
	// for longer than slideYieldEvery, and that window yields, rightly;
	// the bug yielded at every window after the first 20 ms (dozens).
	if got := tr.batch.yields - yields; got > 2 {
		t.Errorf("%d yields, want at most 2: the tracer parked between every window", got)
	}
}
