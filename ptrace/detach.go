//go:build linux

package ptrace

// Detach: every thread stopped and let go with its pending signal,
// including any thread the kernel attached that the bookkeeping missed
// (strays).

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// Detach detaches every thread: each is stopped, then PTRACE_DETACH'ed with
// its pending signal. A group-stopped process stays stopped. It is
// idempotent, and safe from a signal handler goroutine or a deferred
// recover; an exited process detaches without error. A later call returns
// the first call's error, so a caller that detaches early (at the end of
// sampling) and closes later still reports it.
func (p *Process) Detach() error {
	var err error
	if e := p.tr.do(func() { err = p.detach() }); e != nil {
		if errors.Is(e, ErrTracerClosed) {
			return nil // Close detached everything
		}
		return e
	}
	return err
}

func (p *Process) detach() error {
	if p.detached {
		return p.detachErr
	}
	p.detached = true
	p.frozen = true // hold every stop from here on
	defer delete(p.tr.procs, p.pid)
	var first error
	p.tr.stopBatch(func() { first = p.detachThreads() }, nil)
	p.detachErr = first
	return first
}

// detachThreads stops and detaches every thread, then any stray ones.
func (p *Process) detachThreads() error {
	var first error
	for round := 0; round < 3; round++ {
		for _, th := range p.threads {
			if th.state == stateRunning || th.state == stateListening {
				ptraceReq(unix.PTRACE_INTERRUPT, th.tid, 0, 0)
			}
		}
		for len(p.threads) > 0 {
			th := p.someUnheld(false)
			if th != nil {
				// On exit the thread is forgotten. One that stays in an
				// uninterruptible sleep cannot be detached now; it stops
				// when the sleep ends, and the tracer then detaches it
				// (dispatch: no Process claims it), or the kernel does when
				// the tracer thread ends.
				if err := p.waitHeld(th); errors.Is(err, ErrThreadBlocked) {
					p.forget(th)
					p.tr.leftTraced[th.tid] = struct{}{}
					if first == nil {
						first = fmt.Errorf("%w; it stays traced until it wakes or stacktop exits", err)
					}
				}
				continue
			}
			for _, th := range p.threads {
				err := ptraceReq(unix.PTRACE_DETACH, th.tid, 0, uintptr(th.sig))
				if err != nil && err != unix.ESRCH && first == nil {
					first = fmt.Errorf("detach thread %d: %w", th.tid, err)
				}
				p.forget(th)
			}
		}
		// Backstop: the kernel attaches every new thread to us
		// (TRACECLONE). Under heavy thread churn one can slip past the
		// bookkeeping (a TID reused between its clone event and its first
		// stop); /proc says whose tracee it is, so detach whatever of
		// this process is still ours. Without any new thread since the
		// attach there is nothing to find, and a thousand reads of
		// /proc/TID/status are saved.
		if p.clones == 0 {
			break
		}
		strays := p.strays()
		if len(strays) == 0 {
			break
		}
		for _, tid := range strays {
			p.addThread(tid, stateRunning)
		}
	}
	return first
}

// strays lists the threads of the process still traced by this tracer
// that it does not know of.
func (p *Process) strays() []int {
	tids, err := procmaps.Threads(p.pid)
	if err != nil {
		return nil
	}
	var out []int
	for _, tid := range tids {
		if p.threads[tid] == nil && p.tracedByUs(tid) {
			out = append(out, tid)
		}
	}
	return out
}
