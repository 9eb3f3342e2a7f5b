package procmaps

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestSchedstatFileRereads checks what SchedstatFile relies on: pread at
// offset 0 of an open schedstat shows the thread's current run time, not
// the contents of the first read.
func TestSchedstatFileRereads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := OpenSchedstat(os.Getpid(), unix.Gettid())
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	first, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		// Burn 20 ms of this thread's CPU time.
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		}
		cur, err := f.Read()
		if err != nil {
			t.Fatal(err)
		}
		if cur.RunNS >= first.RunNS+10_000_000 {
			return
		}
	}
	t.Fatalf("schedstat still shows %d ns after 60 ms of CPU: stale contents", first.RunNS)
}

// TestProcessClockIsTheThreadsSum checks what the sampler's run ledger
// rests on: between two equal readings of a process's CPU clock, the clock
// is the sum of its threads' schedstat run times plus what exited threads
// ran, a constant while none exits. (Not on this test's own process: a
// process reading its own clock brings its calling thread's count up to
// date first, so two readings never agree.)
func TestProcessClockIsTheThreadsSum(t *testing.T) {
	// 64 threads: one spins (and naps), the main thread wakes every
	// 10 ms, the rest block for good.
	target := targets.Start(t, "manythreads-sframe3", "64", "1")
	pid := target.PID()
	clock, err := OpenProcessClock(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer clock.Close()
	if !clock.Armed() {
		t.Log("no CPU timer could be armed: the clock walks the threads")
	}
	tids, err := Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	files := make([]*SchedstatFile, 0, len(tids))
	for _, tid := range tids {
		f, err := OpenSchedstat(pid, tid)
		if err != nil {
			t.Skip(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	// offset reads the clock, every thread, the clock again; ok is false
	// if the two clock readings differ (a thread was accounted meanwhile).
	offset := func() (off int64, ok bool) {
		before, err := clock.RunNS()
		if err != nil {
			t.Fatal(err)
		}
		var threads uint64
		for _, f := range files {
			ss, err := f.Read()
			if err != nil {
				t.Fatal(err)
			}
			threads += ss.RunNS
		}
		after, err := clock.RunNS()
		if err != nil {
			t.Fatal(err)
		}
		return int64(after - threads), before == after
	}
	var got []int64
	var clocks []uint64
	for attempt := 0; attempt < 1000 && len(got) < 5; attempt++ {
		if off, ok := offset(); ok {
			got = append(got, off)
			c, _ := clock.RunNS()
			clocks = append(clocks, c)
			time.Sleep(3 * time.Millisecond)
		}
	}
	if len(got) < 5 {
		t.Fatalf("only %d of 1000 tries saw the clock hold still while 64 threads were read", len(got))
	}
	if clocks[0] == clocks[len(clocks)-1] {
		t.Fatalf("the target's clock did not move in %d readings: nothing was tested", len(got))
	}
	for _, off := range got[1:] {
		if off != got[0] {
			t.Fatalf("process clock minus the threads' schedstat sums moved while no thread exited: %d ns", got)
		}
	}
	if got[0] < 0 {
		t.Fatalf("process clock is %d ns below the sum of its threads' run times", -got[0])
	}
}

// TestStatFileRunning reads the state of a running thread (this one) and of
// a sleeping one (blocked in read on a pipe), each twice from the same open
// file.
func TestStatFileRunning(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := OpenStat(os.Getpid(), unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rfd := int(r.Fd()) // here, not in the goroutine: it would race with the Close above
	sleeper := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		sleeper <- unix.Gettid()
		var b [1]byte
		unix.Read(rfd, b[:]) // blocks in the kernel until w closes
	}()
	asleep, err := OpenStat(os.Getpid(), <-sleeper)
	if err != nil {
		t.Fatal(err)
	}
	defer asleep.Close()
	for range 2 {
		if running, err := self.Running(); err != nil || !running {
			t.Fatalf("this thread: running %v, %v", running, err)
		}
	}
	var running bool
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if running, err = asleep.Running(); err != nil {
			t.Fatal(err)
		} else if !running {
			break
		}
	}
	w.Close()
	if running {
		t.Fatal("a thread blocked in read reads as running")
	}
}

// ReadThreadState agrees with ParseStat on this process's threads, one of
// which is known to be running (the caller) and so reads R.
func TestReadThreadStateMatchesParseStat(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid := os.Getpid()
	tids, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tids {
		tid, _ := strconv.Atoi(e.Name())
		state, err := ReadThreadState(pid, tid)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			t.Fatal(err)
		}
		st, err := ParseStat(b)
		if err != nil {
			t.Fatal(err)
		}
		// A thread may change state between the two reads; the caller
		// cannot (it is running both times).
		if tid == unix.Gettid() && (state != 'R' || st.State != 'R') {
			t.Errorf("thread %d (the caller): ReadThreadState %c, ParseStat %c, want R", tid, state, st.State)
		}
	}
	if _, err := ReadThreadState(pid, 1<<30); err == nil {
		t.Error("no error for a thread that does not exist")
	}
}
