//go:build linux

package ptrace

// Stops: waiting for a thread's stop (waitHeld, with the grace given a
// thread in an uninterruptible sleep), applying a wait status (onStatus),
// and ending a held stop (resume, release).

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// waitHeld blocks until th reports a stop and holds it there. Any stop
// will do: an interrupt stop, a group-stop, a signal-delivery-stop (its
// signal is kept in th.sig and delivered on resume), a clone or exec event.
// A thread in an uninterruptible sleep gets blockedGrace to stop, then
// ErrThreadBlocked.
func (p *Process) waitHeld(th *thread) error {
	spin, checked := p.tr.spin, false
	for {
		if p.tr.threads[th.tid] != th {
			return ErrThreadExited // dropped by an exec in another thread
		}
		var ws unix.WaitStatus
		var ok bool
		if spin {
			spin = false
			ws, ok = pollStop(th.tid)
		}
		if !ok && !checked {
			checked = true
			var err error
			if ws, ok, err = p.waitUninterruptible(th); err != nil {
				return err
			}
		}
		if !ok {
			var err error
			if ws, ok, err = p.waitStatus(th); err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		held, err := p.onStatus(th, ws, true)
		if err != nil {
			return err
		}
		if held {
			return nil
		}
	}
}

// blockedGrace is how long a wait gives a thread in an uninterruptible
// sleep (state D: a read from a hung NFS server, a vfork parent, a page
// fault on a slow disk) to stop. Such a sleep ignores PTRACE_INTERRUPT
// until it ends, and a tracer asleep in wait4 for that thread would stall
// a whole dump, a tick, or a detach with it: gdb and eu-stack hang there.
// Short D states are common (a disk read, a lock whose holder waits for a
// CPU: 100 ms was exceeded on a loaded 2-core test machine), so the grace
// is generous; it is paid once per stuck thread, which is then marked.
const blockedGrace = time.Second

// waitUninterruptible is the check before a sleeping wait for th, which
// has not stopped yet. If th is in an uninterruptible sleep, it polls for
// th's stop for up to blockedGrace (ok: the status arrived); if th is
// still asleep then, it marks th blocked and returns ErrThreadBlocked. th
// keeps its pending interrupt: it stops when the sleep ends, and that stop
// is taken by whichever wait or drain comes next. Otherwise (not in state
// D, or no longer) the caller's sleeping wait follows.
func (p *Process) waitUninterruptible(th *thread) (ws unix.WaitStatus, ok bool, err error) {
	var deadline time.Time
	for {
		if wpid, ws, err := wait4NoHang(th.tid); err == nil && wpid == th.tid {
			return ws, true, nil
		}
		if state, err := procmaps.ReadThreadState(p.pid, th.tid); err != nil || state != 'D' {
			th.blocked = false
			return 0, false, nil
		}
		switch {
		case th.blocked:
			return 0, false, fmt.Errorf("thread %d: %w", th.tid, ErrThreadBlocked)
		case deadline.IsZero():
			deadline = time.Now().Add(blockedGrace)
		case time.Now().After(deadline):
			th.blocked = true
			return 0, false, fmt.Errorf("thread %d: %w", th.tid, ErrThreadBlocked)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStatus sleeps until th has a wait status and returns it. ok is false
// when it handled other tracees' events instead (the caller asks again).
//
// A main thread's exit is reported only after the other threads' exits
// were reaped, so for it waitStatus handles every tracee's events while
// waiting.
func (p *Process) waitStatus(th *thread) (ws unix.WaitStatus, ok bool, err error) {
	t := p.tr
	if th.tid != p.pid {
		if _, ws, err = wait4(th.tid, 0); err != nil {
			return 0, false, p.gone(th) // ECHILD: reaped already
		}
		return ws, true, nil
	}
	wpid, ws, stray := t.next(0)
	if stray {
		// Poll: our tracees' events hide behind a child's.
		t.drainEach(th)
		if wpid, ws, _ = wait4NoHang(th.tid); wpid != th.tid {
			time.Sleep(time.Millisecond)
			return 0, false, nil
		}
	}
	if wpid < 0 {
		return 0, false, p.gone(th)
	}
	if wpid != th.tid {
		if wpid > 0 {
			t.dispatch(wpid, ws)
		}
		return 0, false, nil
	}
	return ws, true, nil
}

// onStatus applies one wait status of th. With hold (or while frozen) a
// stopped thread is left stopped and onStatus reports true; otherwise it is
// resumed the way the stop requires. A thread exit returns ErrThreadExited
// or ErrProcessExited.
func (p *Process) onStatus(th *thread, ws unix.WaitStatus, hold bool) (bool, error) {
	if ws.Exited() || ws.Signaled() {
		if th.tid == p.pid {
			p.exited = true
		}
		return false, p.gone(th)
	}
	if !ws.Stopped() {
		return false, nil
	}
	th.state, th.groupStop, th.blocked = stateHeld, false, false
	sig := ws.StopSignal()
	switch ptraceEvent(ws) {
	case unix.PTRACE_EVENT_STOP:
		// An interrupt stop, a new thread's first stop, a re-trap after
		// SIGCONT ends a LISTEN (all SIGTRAP), or a group-stop (the stop
		// signal): only the last must be resumed with LISTEN.
		th.groupStop = isStopSignal(sig)
	case unix.PTRACE_EVENT_CLONE:
		if msg, err := unix.PtraceGetEventMsg(th.tid); err == nil {
			// Its first stop may have come (and it may even have exited)
			// before this event: add it unless known. A TID seen before is
			// either that (an exited thread) or a TID the kernel reused
			// (pid_max is often 32768, and thread churn wraps it in
			// seconds): then /proc tells whose tracee it is. Missing a
			// reused TID would leave it traced after Detach.
			if tid := int(msg); p.threads[tid] == nil && (!p.seen[tid] || p.tracedByUs(tid)) {
				p.addThread(tid, stateNewborn)
			}
		}
	case unix.PTRACE_EVENT_EXEC:
		p.execs.Add(1)
		// An execve in another thread: the kernel gave its TID's place to
		// the main thread and reaped the old TID.
		if msg, err := unix.PtraceGetEventMsg(th.tid); err == nil && int(msg) != th.tid {
			if old := p.threads[int(msg)]; old != nil {
				p.forget(old)
			}
		}
		p.leaderZombie = false
	case 0:
		// Signal-delivery-stop: resuming with 0 would discard the signal.
		th.sig = int(sig)
	}
	if hold || p.frozen || th.inFlight {
		// A thread a batch interrupted is held for that batch to sample,
		// whoever waited for its stop (a drain in the middle of the batch).
		return true, nil
	}
	if sig != 0 && ptraceEvent(ws) == 0 {
		p.tr.signalStops++
	}
	p.resume(th)
	return false, nil
}

// resume restarts a held thread: LISTEN after a group-stop (it stays
// stopped but a SIGCONT still wakes it), else CONT with its pending signal.
func (p *Process) resume(th *thread) {
	if th.state != stateHeld {
		return
	}
	if th.groupStop {
		switch err := ptraceReq(unix.PTRACE_LISTEN, th.tid, 0, 0); err {
		case nil:
			th.state = stateListening
		case unix.ESRCH:
			th.state = stateRunning // killed: its exit will be reported
		}
		return
	}
	switch err := ptraceReq(unix.PTRACE_CONT, th.tid, 0, uintptr(th.sig)); err {
	case nil:
		th.sig, th.state = 0, stateRunning
	case unix.ESRCH:
		th.state = stateRunning
	}
}

// release detaches the held thread th at this stop, with its pending
// signal (delivered) and, after a group-stop, back into that stop, as
// Detach would; p forgets it. A thread killed meanwhile stays ours until
// its exit is reported; one the kernel refuses to detach is resumed and
// left for Detach.
func (p *Process) release(th *thread) {
	if th.state != stateHeld {
		return
	}
	switch err := ptraceReq(unix.PTRACE_DETACH, th.tid, 0, uintptr(th.sig)); err {
	case nil:
		if th.sig != 0 {
			p.tr.batch.releasedSignals++
		}
		th.sig = 0
		p.released[th.tid] = true
		p.forget(th)
	case unix.ESRCH:
		th.state = stateRunning // killed: its exit will be reported
	default:
		p.resume(th)
	}
}
