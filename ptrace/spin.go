//go:build linux

package ptrace

import (
	"runtime"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// spinPolicy decides, once per batch, whether the waits for a stop poll
// before they sleep (pollStop).
//
// Polling takes the thread's stop as soon as it happens, but only while
// the tracer has a CPU to itself. When every CPU is wanted, a tracer that
// polls uses up its share and the scheduler preempts it in the middle of
// samples, with the sampled thread stopped until it runs again (a loaded
// test run saw the median pause go from 30 µs to 1.5 ms); one that sleeps
// in wait4 is woken with credit for the sleep and finishes the sample
// first. The tracer thread's own run-queue delay (the wait time in its
// schedstat) tells which case holds: it polls only while, since the
// previous batch, it hardly waited for a CPU.
type spinPolicy struct {
	stat      *procmaps.SchedstatFile // the tracer thread's; nil: never spin
	lastDelay uint64
}

// spinContention is the run-queue delay between two batches above which
// the tracer counts the CPUs as contended.
const spinContention = 100_000 // ns

// newSpinPolicy must run on the tracer thread.
func newSpinPolicy() *spinPolicy {
	s := &spinPolicy{}
	if runtime.NumCPU() < 2 {
		return s // nowhere to poll while the thread stops
	}
	if f, err := procmaps.OpenSchedstat(unix.Getpid(), unix.Gettid()); err == nil {
		s.stat = f
	}
	return s
}

// allowed reports whether this batch's waits may poll.
func (s *spinPolicy) allowed() bool {
	if s.stat == nil {
		return false
	}
	ss, err := s.stat.Read()
	if err != nil {
		return false
	}
	waited := ss.WaitNS - s.lastDelay
	s.lastDelay = ss.WaitNS
	return waited < spinContention
}

func (s *spinPolicy) close() {
	if s.stat != nil {
		s.stat.Close()
		s.stat = nil
	}
}
