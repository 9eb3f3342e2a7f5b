//go:build linux

package ptrace

// Quiet stops: SA_NOCLDSTOP on Go's SIGCHLD handler for the duration of a
// batch of stops (stopBatch), which every sampling path goes through, batch
// or not.

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Quiet stops.
//
// Every ptrace-stop sends the tracer's process a SIGCHLD. For the stops a
// batch of samples causes itself that signal is pure cost, and a large
// one: the kernel wakes one of the program's threads to run Go's signal
// handler, which wakes the os/signal goroutine, which wakes the tracer
// goroutine, all while the sampled thread waits for its resume. Measured
// on a 2-core VM at 999 Hz, a sample took 120-145 µs from
// PTRACE_INTERRUPT to the resume with the signal, 78-84 µs with SIGCHLD
// ignored (stacktop record on bench/gaploop.c).
//
// SA_NOCLDSTOP on the SIGCHLD action stops the kernel from sending the
// signal for stops (of children and tracees alike); exits still send it,
// and waiting is unaffected. A batch sets the flag on Go's own handler for
// its duration, then clears it and drains: a stop some other thread of the
// target made meanwhile (a signal to deliver, a new thread) is found by
// that drain, and any later one signals again. (A caller that can prove no
// other thread ran meanwhile may waive the drain: see
// BatchOptions.OthersStill.)
// Nothing else changes: the
// handler stays Go's, and no child is reaped behind os/exec's back (which
// ignoring SIGCHLD would do).

// quiet counts the batches under way in the whole program: the action is
// process-wide, so with several Tracers the flag is cleared by the last
// batch to end. A stop another Tracer's tracee makes while only the first
// Tracer's batch ran is then found by that Tracer's next drain (its
// safetyPoll at the latest).
var quiet struct {
	mu  sync.Mutex
	n   int
	set bool // whether we set SA_NOCLDSTOP (it was clear before)
}

// stopBatch runs fn, a batch of stops (samples, a freeze, a detach): with
// stop notifications off, and with spinning decided for the batch. It
// drains at the end, unless othersStill (if not nil) reports, once stop
// notifications are back on, that no other tracee can have stopped.
func (t *Tracer) stopBatch(fn func(), othersStill func() bool) {
	t.spin = t.spinner.allowed()
	quiet.mu.Lock()
	if quiet.n++; quiet.n == 1 {
		quiet.set = setNoCLDStop(true)
	}
	quiet.mu.Unlock()
	defer func() {
		quiet.mu.Lock()
		if quiet.n--; quiet.n == 0 && quiet.set {
			setNoCLDStop(false)
			quiet.set = false
		}
		quiet.mu.Unlock()
		if othersStill == nil || !othersStill() {
			t.drain()
		}
	}()
	fn()
}

// sigaction is the kernel's struct sigaction for rt_sigaction on the
// 64-bit architectures stacktop supports (amd64, arm64 and s390x all have
// sa_restorer): handler, flags, restorer, mask.
type sigaction struct {
	handler, flags, restorer, mask uint64
}

const saNoCLDStop = 1 // SA_NOCLDSTOP, the same on every architecture here

// setNoCLDStop sets or clears SA_NOCLDSTOP on the current SIGCHLD action
// and reports whether it changed anything. It leaves SIG_DFL and SIG_IGN
// alone: then no SIGCHLD is sent for a stop anyway.
func setNoCLDStop(on bool) bool {
	var act sigaction
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), 0,
		uintptr(unsafe.Pointer(&act)), unsafe.Sizeof(act.mask), 0, 0); e != 0 {
		return false
	}
	if act.handler <= 1 || (act.flags&saNoCLDStop != 0) == on {
		return false
	}
	act.flags ^= saNoCLDStop
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD),
		uintptr(unsafe.Pointer(&act)), 0, unsafe.Sizeof(act.mask), 0, 0)
	return e == 0
}
