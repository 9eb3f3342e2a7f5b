//go:build linux

package ptrace

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Real-time windows.
//
// While a window runs, the tracer thread holds threads of the target
// stopped (or about to stop), and every moment it waits for a CPU they
// wait with it. The nice value (tracerNice) is not enough where busy
// threads outnumber the CPUs: the kernel's fair scheduler (EEVDF) lets a
// thread that used more than its share wait out others' slices, and a
// window is a burst of CPU work, so the tracer was preempted by the
// target's own spinning threads for up to 8 ms in the middle of windows
// (a 1,000-thread dump with 4 spinners on 2 CPUs, traced with the
// kernel's sched_switch events: the longest stop of a target thread was
// 4.9 ms, p99 2.3 ms).
//
// So, where the kernel allows it (CAP_SYS_NICE, or an RLIMIT_RTPRIO of at
// least 1), the tracer thread runs each window under SCHED_FIFO at the
// lowest real-time priority, and goes back to its normal policy (and its
// nice value) when the window ends. Between windows it is an ordinary
// thread. What it takes from other threads is the CPU time a sample
// costs anyway, only sooner. Under SCHED_FIFO it never yields in a loop
// and spins at most fifoSpin (30 µs, record and top only, and only with
// another CPU to run the thread it waits for) before it sleeps between
// polls, so the threads it waits for get the CPU; the kernel's real-time
// throttling bounds it in any case. A dump's trip (slide) stays under it
// from window to window and leaves it while it waits for the caller. SCHED_RESET_ON_FORK keeps the policy from any thread it might
// create. DisableRealtime turns this off for the whole program.
//
// Go's runtime can still take the tracer's goroutine off its thread
// (a garbage collection, or sysmon preempting a goroutine that ran for
// 10 ms); it then waits for a P. Programs whose other goroutines keep
// every P busy while a window runs (dump's walks) keep a P spare for it.

// realtimeOff: DisableRealtime was called.
var realtimeOff atomic.Bool

// DisableRealtime keeps every tracer thread of the program at its normal
// scheduling policy during windows.
func DisableRealtime() { realtimeOff.Store(true) }

const (
	schedOther       = 0
	schedFIFO        = 1
	schedResetOnFork = 0x40000000
)

// enterRealtime puts the calling (tracer) thread under SCHED_FIFO, if
// allowed and not there already, and reports whether it did (then the
// caller leaves). A refusal is remembered: the tracer does not ask again.
func (t *Tracer) enterRealtime() bool {
	if t.realtime || t.realtimeDenied || realtimeOff.Load() {
		return false
	}
	prio := int32(1)
	if _, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, schedFIFO|schedResetOnFork, uintptr(unsafe.Pointer(&prio))); e != 0 {
		t.realtimeDenied = true
		return false
	}
	t.realtime = true
	t.realtimeWindows++
	return true
}

// leaveRealtime returns the calling thread to SCHED_OTHER; the kernel
// keeps its nice value. SCHED_RESET_ON_FORK stays: without CAP_SYS_NICE
// (real-time allowed by RLIMIT_RTPRIO alone) the kernel refuses to clear
// it, and would leave the thread under SCHED_FIFO. If the kernel refuses
// all the same, the tracer never enters real time again and never spins
// (a spin under SCHED_FIFO lets no ordinary thread run on its CPU).
func (t *Tracer) leaveRealtime() {
	prio := int32(0)
	if _, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, schedOther|schedResetOnFork, uintptr(unsafe.Pointer(&prio))); e != 0 {
		t.realtimeDenied = true
		t.spinner.close() // no spinning from now on (spinPolicy)
		return
	}
	t.realtime = false
}
