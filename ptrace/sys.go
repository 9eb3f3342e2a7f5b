//go:build linux

package ptrace

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seizeOptions are set on every seized thread. TRACECLONE auto-attaches new
// threads. TRACEEXEC replaces the legacy SIGTRAP a traced thread gets after
// execve (which, delivered, would kill the target) with an event stop.
// EXITKILL is deliberately absent: if stacktop dies, its targets live on.
const seizeOptions = unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXEC

// lazySeizeOptions are set on the threads of a lazy Process (AttachLazy):
// TRACEEXEC for the same reason, and no TRACECLONE. Its thread list is
// /proc's, listed again until it holds no new thread, so a thread created
// during the dump is seized and sampled by a later batch anyway;
// TRACECLONE would only make the kernel stop every new thread of the
// (seized) main thread until the tracer resumed it, and add tracees.
const lazySeizeOptions = unix.PTRACE_O_TRACEEXEC

// ptraceReq issues one ptrace request. unix.PtraceSeize cannot pass options
// and unix has no PTRACE_LISTEN wrapper, so every request goes through here.
//
// It is a raw system call: no ptrace request blocks (they act on a tracee
// that is stopped or merely signal it), so telling the Go scheduler about
// the call (entersyscall/exitsyscall, and a P possibly handed off and
// reacquired) would only lengthen the time a sampled thread stays stopped.
func ptraceReq(req int, tid int, addr, data uintptr) error {
	_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, uintptr(req), uintptr(tid), addr, data, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// readRemote is process_vm_readv of one remote range into one local buffer,
// as a raw system call for the same reason as ptraceReq: it copies a stack
// window of a stopped thread (anonymous memory, resident in practice) and
// the thread waits for it.
func readRemote(pid int, local *unix.Iovec, remote *unix.RemoteIovec) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
		uintptr(unsafe.Pointer(local)), 1, uintptr(unsafe.Pointer(remote)), 1, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// wait4NoHang is a non-blocking wait4 for tid, raw (it cannot block).
func wait4NoHang(tid int) (int, unix.WaitStatus, error) {
	var ws unix.WaitStatus
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_WAIT4, uintptr(tid), uintptr(unsafe.Pointer(&ws)),
			uintptr(unix.WNOHANG|unix.WALL|unix.WNOTHREAD), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, 0, e
		}
		return int(r), ws, nil
	}
}

// waitAny consumes the next wait event of any tracee of this thread (or
// child: see Tracer.strays); with WNOHANG it cannot block, so it skips the
// scheduler hand-off as wait4NoHang does.
func waitAny(options int) (int, unix.WaitStatus, error) {
	if options&unix.WNOHANG == 0 {
		return wait4(-1, options)
	}
	return wait4NoHang(-1)
}

// stopSpin is how long pollStop polls for a stop before the tracer sleeps
// in wait4 instead. A running thread stops some 20 µs after
// PTRACE_INTERRUPT; a tracer asleep in wait4 must then be woken and
// scheduled, which here added about 20 µs to every pause, in which the
// sampled thread waits for us (bench/ptrace-floor.c with and without
// SPIN=1, and bench/gaploop's lost time). Longer than the typical stop,
// short enough that a thread which does not stop soon (runnable but
// waiting for a CPU, or in uninterruptible sleep) costs little polling.
// Spinning only pays while a CPU is free: see spinPolicy.
const stopSpin = 150 * time.Microsecond

// pollStop polls tid's wait status without sleeping for up to stopSpin.
// ok reports whether it got one; on any error it leaves the diagnosis to
// the sleeping wait that follows.
//
// Between polls it yields the CPU. With nothing else runnable there,
// sched_yield returns at once and this is a plain poll. But the thread to
// stop may be waiting for this very CPU (say two busy threads of the
// target and the tracer on two CPUs): it can only enter its stop once the
// tracer lets it run, and a tracer that merely polled held it off for the
// whole stopSpin. On manythreads with two spinners, about a sixth of the
// polls ran out that way.
func pollStop(tid int) (ws unix.WaitStatus, ok bool) {
	deadline := time.Now().Add(stopSpin)
	for {
		wpid, ws, err := wait4NoHang(tid)
		if err != nil {
			return 0, false
		}
		if wpid == tid {
			return ws, true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// blockSIGCHLD blocks SIGCHLD on the calling OS thread only. Each ptrace-stop
// of a tracee sends the tracer SIGCHLD; unblocked on the tracer thread, the
// kernel often delivers it there, right as wait4 returns with the tracee
// stopped, and Go's signal handler then runs inside the pause. Blocked
// here, it goes to another thread of the process and still reaches
// os/signal (and so the tracer's drain). Call it on a locked thread.
func blockSIGCHLD() error {
	set := unix.Sigset_t{}
	set.Val[0] = 1 << (uint(unix.SIGCHLD) - 1)
	return unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil)
}

func seize(tid int, options uintptr) error {
	return ptraceReq(unix.PTRACE_SEIZE, tid, 0, options)
}

// getRegset reads NT_PRSTATUS into buf (size bytes of the arch's layout).
func getRegset(tid int, iov *unix.Iovec) error {
	return ptraceReq(unix.PTRACE_GETREGSET, tid, uintptr(ntPRSTATUS), uintptr(unsafe.Pointer(iov)))
}

const ntPRSTATUS = 1

// wait4 waits for a tracee thread (tid, or -1 for any). __WALL includes
// clone children; __WNOTHREAD limits the wait to this thread's own tracees,
// so events of another Tracer's tracees or of the program's own children
// (forked from other threads) are never consumed here.
func wait4(tid int, options int) (int, unix.WaitStatus, error) {
	var ws unix.WaitStatus
	for {
		wpid, err := unix.Wait4(tid, &ws, options|unix.WALL|unix.WNOTHREAD, nil)
		if err == unix.EINTR {
			continue
		}
		return wpid, ws, err
	}
}

// peekTracee returns the pid of the next waitable event of this thread's
// tracees or children without consuming it (waitid WNOWAIT): 0 when none
// is pending (with WNOHANG), -1 when there is nothing to wait for.
func peekTracee(options int) int {
	pid, err := peekWait(options)
	if err != nil {
		return -1
	}
	return pid
}

// peekWait is peekTracee's waitid, with its error: ECHILD when this
// thread has neither tracee nor child.
func peekWait(options int) (int, error) {
	var info unix.Siginfo
	options |= unix.WEXITED | unix.WSTOPPED | unix.WNOWAIT | unix.WALL | unix.WNOTHREAD
	for {
		var err error
		if options&unix.WNOHANG != 0 {
			// Cannot block: skip the scheduler hand-off (see ptraceReq).
			_, _, e := unix.RawSyscall6(unix.SYS_WAITID, unix.P_ALL, 0, uintptr(unsafe.Pointer(&info)), uintptr(options), 0, 0)
			if e != 0 {
				err = e
			}
		} else {
			err = unix.Waitid(unix.P_ALL, 0, &info, options, nil)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		// si_pid is the first field of the union, at offset 16 on 64-bit Linux.
		return int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), 16))), nil
	}
}

// ptraceEvent extracts the PTRACE_EVENT_* number of a stop status.
func ptraceEvent(ws unix.WaitStatus) int { return int(uint32(ws)>>16) & 0xff }

func isStopSignal(sig unix.Signal) bool {
	switch sig {
	case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return true
	}
	return false
}
