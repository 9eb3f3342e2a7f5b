//go:build linux

package ptrace

import (
	"bytes"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
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
// first. The tracer thread's own run-queue delay (the second field of its
// schedstat) tells which case holds: it polls only while, since the
// previous batch, it hardly waited for a CPU.
type spinPolicy struct {
	fd        int // the tracer thread's schedstat, or -1: never spin
	lastDelay uint64
	buf       [64]byte
}

// spinContention is the run-queue delay between two batches above which
// the tracer counts the CPUs as contended.
const spinContention = 100_000 // ns

// newSpinPolicy must run on the tracer thread.
func newSpinPolicy() *spinPolicy {
	s := &spinPolicy{fd: -1}
	if runtime.NumCPU() < 2 {
		return s // nowhere to poll while the thread stops
	}
	path := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/schedstat"
	if fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		s.fd = fd
	}
	return s
}

// allowed reports whether this batch's waits may poll.
func (s *spinPolicy) allowed() bool {
	if s.fd < 0 {
		return false
	}
	n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(s.fd),
		uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)), 0, 0, 0)
	if e != 0 {
		return false
	}
	delay, ok := runDelay(s.buf[:n])
	if !ok {
		return false
	}
	waited := delay - s.lastDelay
	s.lastDelay = delay
	return waited < spinContention
}

// runDelay parses the second field of a schedstat line,
// "run_ns wait_ns timeslices": the time spent waiting for a CPU.
func runDelay(b []byte) (uint64, bool) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[1]), 10, 64)
	return n, err == nil
}

func (s *spinPolicy) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
