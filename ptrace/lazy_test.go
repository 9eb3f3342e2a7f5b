//go:build linux

package ptrace

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// lazyDump samples every thread of the lazily attached p as stacktop dump
// does: one sliding Release batch of /proc's threads (first, if not nil:
// a listing of p.ListThreads), then one of the threads listed since, until
// a listing holds none new. each, if not nil, sees every call. It
// returns every thread's error.
func lazyDump(t *testing.T, p *Process, first []int, each func(tid int, s *Sample, err error)) map[int]error {
	t.Helper()
	errs := map[int]error{}
	for round := 0; ; round++ {
		tids, err := first, error(nil)
		if first = nil; tids == nil {
			tids, err = p.ListThreads()
		}
		if err != nil {
			t.Fatal(err)
		}
		tids = slices.DeleteFunc(tids, func(tid int) bool { _, done := errs[tid]; return done })
		if len(tids) == 0 {
			return errs
		}
		if round == 20 {
			t.Fatalf("threads %v new in the 20th listing", tids)
		}
		err = p.SampleBatch(tids, BatchOptions{StackWindow: 1024, Release: true, Overlap: true},
			func(i int, s *Sample, err error) bool {
				if _, dup := errs[tids[i]]; dup {
					t.Errorf("thread %d: a second call", tids[i])
				}
				if err == nil && s.TID != tids[i] {
					t.Errorf("call for thread %d carried the sample of %d", tids[i], s.TID)
				}
				errs[tids[i]] = err
				if each != nil {
					each(tids[i], s, err)
				}
				return true
			})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A lazy Process traces only the main thread until a batch seizes the
// others; threads the main thread creates are not traced (no
// TRACECLONE); a thread created in the middle of a dump is sampled by the
// next batch, from /proc's listing, and every thread is untraced
// afterwards.
func TestLazyNewThread(t *testing.T) {
	tg := startTarget(t, "grow", "30", "2")
	tr := NewTracer()
	defer tr.Close()
	p := attachIn(t, tr, tg.pid, true)
	first, err := p.ListThreads()
	if err != nil {
		t.Fatal(err)
	}
	// A thread born of the seized main thread after the attach is not
	// the tracer's.
	born := waitNewThread(t, tg.pid, first)
	if st, err := procmaps.ReadStatus(tg.pid, born); err == nil && st.TracerPID != 0 {
		t.Errorf("thread %d, created by the seized main thread, is traced by %d", born, st.TracerPID)
	}
	var mid []int // created while the first batch ran
	calls := 0
	errs := lazyDump(t, p, nil, func(tid int, s *Sample, err error) {
		if calls++; calls == 1 {
			mid = append(mid, waitNewThread(t, tg.pid, first, born))
		}
	})
	for _, tid := range append(mid, born) {
		err, ok := errs[tid]
		switch {
		case !ok:
			t.Errorf("thread %d, created during the dump, was not sampled", tid)
		case err != nil:
			t.Errorf("thread %d, created during the dump: %v", tid, err)
		}
	}
	for tid, err := range errs {
		if err != nil {
			t.Errorf("thread %d: %v", tid, err)
		}
	}
	if len(errs) < len(first)+2 {
		t.Errorf("%d threads sampled, want at least %d", len(errs), len(first)+2)
	}
	detachUntraced(t, p, tg.pid)
}

// waitNewThread waits (5 s at most) for a thread of pid that is not in
// known or known2, and returns it.
func waitNewThread(t *testing.T, pid int, known []int, known2 ...int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, tid := range mustThreads(t, pid) {
			if !slices.Contains(known, tid) && !slices.Contains(known2, tid) {
				return tid
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no new thread within 5 s")
	return 0
}

// Threads that exit during a lazy dump are ErrThreadExited, whether they
// are gone by their seize or exit in flight; nothing else fails, and no
// thread stays traced.
func TestLazyThreadExits(t *testing.T) {
	tg := startTarget(t, "churn")
	tr := NewTracer()
	defer tr.Close()
	exited, sampled, goneFirst := 0, 0, 0
	for round := 0; round < 30; round++ {
		p := attachIn(t, tr, tg.pid, true)
		// A listing that holds a worker, and that worker gone before its
		// seize.
		var listed []int
		gone := 0
		for deadline := time.Now().Add(2 * time.Second); gone == 0 && time.Now().Before(deadline); {
			if len(listed) < 2 {
				var err error
				if listed, err = p.ListThreads(); err != nil {
					t.Fatal(err)
				}
				continue
			}
			now := mustThreads(t, tg.pid)
			for _, tid := range listed {
				if tid != tg.pid && !slices.Contains(now, tid) {
					gone = tid
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
		errs := lazyDump(t, p, listed, nil)
		for tid, err := range errs {
			switch {
			case err == nil:
				sampled++
			case errors.Is(err, ErrThreadExited):
				exited++
			default:
				t.Errorf("round %d, thread %d: %v", round, tid, err)
			}
		}
		if gone != 0 {
			goneFirst++
		}
		if err, ok := errs[gone]; gone != 0 && (!ok || !errors.Is(err, ErrThreadExited)) {
			t.Errorf("round %d: thread %d, gone before the batch: %v (sampled: %v), want ErrThreadExited", round, gone, err, ok)
		}
		if err := p.Detach(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntraced(t, tg.pid)
	if exited == 0 || goneFirst == 0 {
		t.Errorf("in 30 dumps of a churning process %d threads exited, %d before their batch", exited, goneFirst)
	}
	t.Logf("%d samples, %d threads exited, %d of them before their batch", sampled, exited, goneFirst)
}

// A process that exits during a lazy dump ends it with ErrProcessExited,
// and Detach then succeeds.
func TestLazyProcessExits(t *testing.T) {
	tg := startTarget(t, "exit", "300")
	tg.reaped = true // we trace our own child: the tracer may reap its exit
	tr := NewTracer()
	defer tr.Close()
	exited := false
	for deadline := time.Now().Add(10 * time.Second); !exited; {
		if time.Now().After(deadline) {
			t.Fatal("no ErrProcessExited within 10 s")
		}
		p, err := tr.AttachLazy(tg.pid)
		if err != nil {
			var ae *AttachError
			if errors.As(err, &ae) && (ae.Cause == CauseNoProcess || ae.Cause == CauseZombie) {
				t.Skipf("exited between two dumps: %v", err)
			}
			t.Fatal(err)
		}
		tids, err := p.ListThreads()
		if err != nil {
			tids = []int{tg.pid}
		}
		err = p.SampleBatch(tids, BatchOptions{StackWindow: 1024, Release: true, Overlap: true},
			func(i int, s *Sample, err error) bool {
				switch {
				case errors.Is(err, ErrProcessExited):
					exited = true
				case err != nil && !errors.Is(err, ErrThreadExited):
					t.Errorf("thread %d: %v", tids[i], err)
				}
				return true
			})
		if errors.Is(err, ErrProcessExited) {
			exited = true
		} else if err != nil {
			t.Fatal(err)
		}
		if err := p.Detach(); err != nil {
			t.Fatalf("Detach: %v", err)
		}
	}
}

// A leader that leaves (pthread_exit) while its threads run is a zombie
// until they end. Whether it left before the attach or during the dump,
// its samples say it exited, never that the process had no such thread.
func TestLazyLeaderExits(t *testing.T) {
	for _, attachFirst := range []bool{true, false} {
		name := map[bool]string{true: "attached-first", false: "left-first"}[attachFirst]
		t.Run(name, func(t *testing.T) { testLazyLeaderExits(t, attachFirst) })
	}
}

func testLazyLeaderExits(t *testing.T, attachFirst bool) {
	tg := startTarget(t, "leaderexit")
	leave := func() {
		if _, err := io.WriteString(tg.in, "go\n"); err != nil {
			t.Fatal(err)
		}
		waitState(t, tg.pid, "Z")
	}
	if !attachFirst {
		leave()
	}
	tr := NewTracer()
	defer tr.Close()
	p, err := tr.AttachLazy(tg.pid)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Detach(); err != nil {
			t.Errorf("Detach: %v", err)
		}
	}()
	tids, err := p.ListThreads()
	if err != nil || len(tids) != 2 {
		t.Fatalf("ListThreads = %v, %v; want the leader and a spinner", tids, err)
	}
	if attachFirst {
		leave()
	}
	for batch := 0; batch < 3; batch++ {
		var leaderErr error
		err := p.SampleBatch(tids, BatchOptions{StackWindow: 1024, Overlap: true},
			func(i int, s *Sample, err error) bool {
				switch {
				case tids[i] == tg.pid:
					leaderErr = err
				case err != nil:
					t.Errorf("batch %d: spinner %d: %v", batch, tids[i], err)
				}
				return true
			})
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if !errors.Is(leaderErr, ErrThreadExited) {
			t.Errorf("batch %d: the zombie leader's sample: %v, want ErrThreadExited", batch, leaderErr)
		}
	}
}

// A process stopped before AttachLazy is attached whole (every thread
// seized at once, its group-stop report taken at the seize), stays
// stopped through a dump, and is left stopped and untraced.
func TestLazyAlreadyStopped(t *testing.T) {
	tg := startTarget(t, "many", "20", "2")
	syscall.Kill(tg.pid, syscall.SIGSTOP)
	waitState(t, tg.pid, "T")
	tr := NewTracer()
	defer tr.Close()
	p, err := tr.AttachLazy(tg.pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.Lazy() || !p.WasStopped() {
		t.Fatalf("stopped process: Lazy %v, WasStopped %v; want attached whole", p.Lazy(), p.WasStopped())
	}
	if got, want := p.Threads(), mustThreads(t, tg.pid); !slices.Equal(got, want) {
		t.Fatalf("Threads() = %d threads, /proc lists %d", len(got), len(want))
	}
	before := cpuTicks(t, tg.pid)
	_, _, errs := batchAll(t, p, BatchOptions{StackWindow: 1024, Release: true, Overlap: true})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	detachStillStopped(t, p, tg.pid, before)
}

// A process stopped (SIGSTOP) after AttachLazy stays stopped through a
// lazy dump: each thread seized in its group-stop is sampled there and
// detached back into it; SIGCONT then resumes the process.
func TestLazyStoppedAfterOpen(t *testing.T) {
	tg := startTarget(t, "many", "20", "2")
	tr := NewTracer()
	defer tr.Close()
	p := attachIn(t, tr, tg.pid, true)
	syscall.Kill(tg.pid, syscall.SIGSTOP)
	waitState(t, tg.pid, "Tt") // t: the traced main thread's group-stop
	for _, tid := range mustThreads(t, tg.pid) {
		if tid != tg.pid {
			waitState(t, tid, "T")
		}
	}
	before := cpuTicks(t, tg.pid)
	for tid, err := range lazyDump(t, p, nil, nil) {
		if err != nil {
			t.Errorf("thread %d: %v", tid, err)
		}
	}
	detachStillStopped(t, p, tg.pid, before)
}

// A lazy Process seizes only threads /proc listed for it: a TID of
// another process is ErrUnknownThread and stays untraced. Freeze, which
// needs every thread, is refused.
func TestLazyUnlisted(t *testing.T) {
	tg := startTarget(t, "spin", "2")
	other := startTarget(t, "spin", "1")
	tr := NewTracer()
	defer tr.Close()
	p := attachIn(t, tr, tg.pid, true)
	if err := p.Freeze(); !errors.Is(err, ErrLazyFreeze) {
		t.Errorf("Freeze of a lazy Process: %v, want ErrLazyFreeze", err)
	}
	var got error
	err := p.SampleBatch([]int{other.pid}, BatchOptions{StackWindow: 1024, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool { got = err; return true })
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got, ErrUnknownThread) {
		t.Errorf("sampling another process's thread: %v, want ErrUnknownThread", got)
	}
	checkUntraced(t, other.pid)
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
}

// Signals sent during lazy dumps are all delivered: a storm of them at
// any moment (to threads traced or not), and in each round one that
// leaves the (seized) main thread in a signal-delivery-stop nobody has
// seen yet, which the batch finds at its interrupt: it is released with
// its signal.
func TestLazyReleaseSignals(t *testing.T) {
	tg := startTarget(t, "signals")
	tr := NewTracer()
	defer tr.Close()
	const minRounds = 20
	sent := rtStorm(t, tg.pid)
	rounds := 0
	released := tr.batch.releasedSignals
	for done := false; !done || rounds < minRounds; rounds++ {
		select {
		case <-sent:
			done = true
		default:
		}
		p := attachIn(t, tr, tg.pid, true)
		tr.do(func() { tr.stopBatch(func() { signalStop(t, tg.pid, tg.pid, rtsig) }, func() bool { return true }) })
		for tid, err := range lazyDump(t, p, nil, nil) {
			if err != nil {
				t.Errorf("thread %d: %v", tid, err)
			}
		}
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
	if n := tr.batch.releasedSignals - released; n < int64(rounds/2) {
		t.Errorf("%d threads released with their signal in %d rounds, want about one a round", n, rounds)
	}
	t.Logf("%d lazy dumps; %d threads released with their signal", rounds, tr.batch.releasedSignals-released)
}

// Threads a lazy batch seized and did not release (it ended early) are
// detached by Tracer.Close, as Detach would.
func TestLazyCloseAfterEarlyEnd(t *testing.T) {
	tg := startTarget(t, "many", "200", "2")
	tr := NewTracer()
	p := attachIn(t, tr, tg.pid, true)
	calls := 0
	err := p.SampleBatch(toSample(t, p), BatchOptions{StackWindow: 1024, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool {
			calls++
			return calls < 20
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(tracedThreads(t, tg.pid)) == 0 {
		t.Log("every seized thread was released before the batch ended")
	}
	tr.Close()
	checkUntraced(t, tg.pid)
	waitNoneStopped(t, tg.pid)
}

// detachStillStopped detaches p from the stopped process pid and checks
// that it stayed stopped (every thread T, no CPU time since before), then
// resumes it.
func detachStillStopped(t *testing.T, p *Process, pid int, before uint64) {
	t.Helper()
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, pid)
	time.Sleep(50 * time.Millisecond)
	for _, tid := range mustThreads(t, pid) {
		if st, _ := statField(t, fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid)); st != 'T' {
			t.Errorf("thread %d state %c after the dump, want T", tid, st)
		}
	}
	if after := cpuTicks(t, pid); after != before {
		t.Errorf("stopped process ran: %d -> %d ticks", before, after)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	waitState(t, pid, "RS")
}

// AttachLazyListed takes the caller's listing for the attach's own: its
// threads are seized by a batch without another listing, a thread created
// since is not (ErrUnknownThread, untraced) until ListThreads lists it,
// and then is sampled. Every thread is untraced afterwards.
func TestLazyListed(t *testing.T) {
	tg := startTarget(t, "grow", "8", "20")
	tr := NewTracer()
	defer tr.Close()
	l, err := ListThreads(tg.pid)
	if err != nil {
		t.Fatal(err)
	}
	if l.PID() != tg.pid || !slices.Contains(l.TIDs(), tg.pid) || !slices.IsSorted(l.TIDs()) {
		t.Fatalf("listing of %d: %d %v", tg.pid, l.PID(), l.TIDs())
	}
	listed := slices.Clone(l.TIDs())
	p, err := tr.AttachLazyListed(l)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Lazy() {
		t.Fatal("AttachLazyListed attached whole")
	}
	if !slices.Equal(l.TIDs(), listed) {
		t.Errorf("the attach changed the caller's listing: %v, was %v", l.TIDs(), listed)
	}
	born := waitNewThread(t, tg.pid, listed)
	var bornErr error
	err = p.SampleBatch([]int{born}, BatchOptions{StackWindow: 1024, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool { bornErr = err; return true })
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(bornErr, ErrUnknownThread) {
		t.Errorf("thread %d, created after the listing, before a listing holds it: %v, want ErrUnknownThread", born, bornErr)
	}
	if st, err := procmaps.ReadStatus(tg.pid, born); err == nil && st.TracerPID != 0 {
		t.Errorf("thread %d, never listed, is traced by %d", born, st.TracerPID)
	}
	errs := lazyDump(t, p, listed, nil)
	for _, tid := range append(listed, born) {
		if err, ok := errs[tid]; !ok || err != nil {
			t.Errorf("thread %d: sampled %v, %v", tid, ok, err)
		}
	}
	detachUntraced(t, p, tg.pid)
}

// TestTIDTakenByAnotherProcess: a TID listed as a thread of the process,
// which exits and is taken by a thread of another process before the
// seize (here: the other process's main thread, listed by hand), is let
// go at once: its sample is ErrThreadExited, never the other process's
// stack, and that thread is untraced and running afterwards.
func TestTIDTakenByAnotherProcess(t *testing.T) {
	tg := startTarget(t, "spin", "1")
	other := startTarget(t, "spin", "1")
	tr := NewTracer()
	defer tr.Close()
	p, err := tr.AttachLazy(tg.pid)
	if err != nil {
		t.Fatal(err)
	}
	p.listMu.Lock()
	p.listed[other.pid] = true // as if listed under tg, then reused
	p.listMu.Unlock()
	var got error
	sampled := false
	err = p.SampleBatch([]int{other.pid}, BatchOptions{StackWindow: 1024, Release: true, Overlap: true},
		func(i int, s *Sample, err error) bool { got, sampled = err, s != nil; return true })
	if err != nil {
		t.Fatal(err)
	}
	if sampled || !errors.Is(got, ErrThreadExited) {
		t.Errorf("another process's thread: sampled %v, %v; want ErrThreadExited", sampled, got)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := procmaps.ReadStatus(other.pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		state, _ := statField(t, fmt.Sprintf("/proc/%d/stat", other.pid))
		if st.TracerPID == 0 && state != 't' && state != 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other process's thread is left traced by %d (state %c)", st.TracerPID, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
