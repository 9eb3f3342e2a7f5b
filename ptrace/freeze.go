//go:build linux

package ptrace

// Freeze and Thaw: every thread stopped and held for a consistent
// snapshot, then resumed.

import (
	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// Freeze stops every thread and keeps it stopped, for a consistent
// snapshot; Sample then reads without stopping or resuming. Threads created
// meanwhile are caught too. Thaw (or Detach) ends it.
func (p *Process) Freeze() error {
	var err error
	if e := p.tr.do(func() { err = p.freeze() }); e != nil {
		return e
	}
	return err
}

func (p *Process) freeze() error {
	if err := p.usable(); err != nil {
		return err
	}
	if p.lazy {
		return ErrLazyFreeze
	}
	p.frozen = true
	var err error
	p.tr.stopBatch(func() { err = p.stopAll() }, nil)
	return err
}

// stopAll interrupts every running thread at once, then collects the stops.
func (p *Process) stopAll() error {
	for _, th := range p.threads {
		if th.state == stateRunning || th.state == stateListening {
			ptraceReq(unix.PTRACE_INTERRUPT, th.tid, 0, 0)
		}
	}
	for {
		th := p.someUnheld(true)
		if th == nil {
			return nil
		}
		if err := p.waitHeld(th); err == ErrProcessExited {
			return err
		}
	}
}

// someUnheld returns a thread not yet held, the main thread last: a main
// thread's exit is reported only after every other thread was reaped.
// skipBlocked leaves out threads found in an uninterruptible sleep, which
// no wait can hold until it ends.
func (p *Process) someUnheld(skipBlocked bool) *thread {
	var leader *thread
	for _, th := range p.threads {
		if th.state == stateHeld || (skipBlocked && th.blocked) {
			continue
		}
		if th.tid != p.pid {
			return th
		}
		leader = th
	}
	if leader != nil && len(p.threads) > 1 && !p.leaderZombie {
		// Every other thread is held, so none will exit: a zombie main
		// thread (it called pthread_exit) would never report.
		if st, err := procmaps.ReadStat(p.pid, p.pid); err == nil && (st.State == 'Z' || st.State == 'X') {
			p.leaderZombie = true
		}
	}
	if leader != nil && p.leaderZombie {
		p.forget(leader) // never reports a stop; the kernel unlinks it on exit
		return p.someUnheld(skipBlocked)
	}
	return leader
}

// Thaw resumes what Freeze stopped, delivering signals that arrived
// meanwhile; group-stopped threads stay stopped.
func (p *Process) Thaw() error {
	var err error
	if e := p.tr.do(func() {
		if err = p.usable(); err != nil {
			return
		}
		p.frozen = false
		for _, th := range p.threads {
			p.resume(th)
		}
	}); e != nil {
		return e
	}
	return err
}
