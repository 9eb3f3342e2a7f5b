//go:build linux

package ptrace

// One sample of one thread (Sample, SampleInto): interrupt it, wait for
// its stop, read its registers and stack window (read, which batches use
// too), resume it.

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sample stops thread tid (PTRACE_INTERRUPT), reads its registers and up
// to stackWindow bytes of stack from its stack pointer, and resumes it the
// way it was running (CONT, delivering a pending signal, or LISTEN for a
// group-stopped process). stackEnd, when above the stack pointer, bounds
// the read (the end of the stack mapping); 0 means no bound. While the
// process is frozen the thread is read without being stopped or resumed.
func (p *Process) Sample(tid int, stackWindow int, stackEnd uint64) (Sample, error) {
	var s Sample
	err := p.SampleInto(&s, tid, stackWindow, stackEnd)
	return s, err
}

// SampleInto is Sample reusing s: s.Stack's array is overwritten, so a
// caller that keeps stacks must copy them. It allocates nothing when
// cap(s.Stack) >= stackWindow.
func (p *Process) SampleInto(s *Sample, tid int, stackWindow int, stackEnd uint64) error {
	if prstatusSize == 0 {
		return ErrUnsupportedArch
	}
	var err error
	if e := p.tr.do(func() {
		p.tr.stopBatch(func() { err = p.sample(s, tid, stackWindow, stackEnd) }, nil)
	}); e != nil {
		return e
	}
	return err
}

func (p *Process) sample(s *Sample, tid int, window int, end uint64) error {
	if err := p.usable(); err != nil {
		return err
	}
	th := p.threads[tid]
	if th == nil || (tid == p.pid && p.leaderZombie) {
		return p.notTraced(tid)
	}
	if n := max(window, 0); cap(s.Stack) < n {
		// Allocate before the stop, not while the thread waits for us.
		s.Stack = make([]byte, n)
	}
	t0 := time.Now()
	if (th.state == stateRunning || th.state == stateListening) && !th.blocked {
		// ESRCH means the thread is gone: waitHeld then collects its exit.
		ptraceReq(unix.PTRACE_INTERRUPT, tid, 0, 0)
	}
	if th.state != stateHeld {
		if err := p.waitHeld(th); err != nil {
			return err
		}
	}
	t1 := time.Now()
	err := p.read(th, s, window, end, nil)
	if !p.frozen {
		p.resume(th)
	}
	t2 := time.Now()
	s.Stopped, s.Total = t2.Sub(t1), t2.Sub(t0)
	return err
}

// read fills s from the held thread th: one GETREGSET (two on s390x, for
// the FPRs), one process_vm_readv of window bytes above SP, or, in a
// batch b with a WindowAt, of what it says for this thread at this SP.
func (p *Process) read(th *thread, s *Sample, window int, end uint64, b *batchSlots) error {
	t := p.tr
	t.rawIov.Base = (*byte)(unsafe.Pointer(&t.raw))
	t.rawIov.SetLen(prstatusSize)
	if err := getRegset(th.tid, &t.rawIov); err != nil {
		if err == unix.ESRCH {
			// SIGKILL (exit_group, execve) wakes even a stopped tracee:
			// its exit will be reported.
			th.state = stateRunning
			if p.dying() {
				return ErrProcessExited
			}
			return ErrThreadExited
		}
		return fmt.Errorf("thread %d: PTRACE_GETREGSET: %w", th.tid, err)
	}
	convertRegs(&t.raw, &s.Regs)
	s.Asleep, s.AtSyscallExit = syscallStop(&t.raw)
	if fprsInDWARF {
		// s390x code saves callee-saved GPRs (r11 the frame pointer, r15)
		// in FPRs, and its SFrame rows say so: without them such a frame
		// 0 cannot be stepped. One more GETREGSET, on s390x only; a
		// failure leaves the FPRs unknown, as before.
		if raw, err := getRegsetInto(th.tid, ntPRFPREG, t.fpRaw[:]); err == nil {
			convertFPRegs(raw, &s.Regs)
		}
	}
	s.TID = th.tid
	sp := s.Regs.SP()
	s.StackAddr, s.StackErr = sp, nil
	if b != nil && b.windowAt != nil {
		window = min(b.windowAt(th.tid, &s.Regs), b.maxWindow)
	}
	n := max(window, 0)
	if end > sp && end-sp < uint64(n) {
		n = int(end - sp)
	}
	if cap(s.Stack) < n {
		switch {
		case b == nil:
			s.Stack = make([]byte, n) // a lone sample's buffer is its caller's
		case len(b.arena)-b.arenaUsed >= n:
			// Cut from the window's arena, allocated before the stop.
			s.Stack = b.arena[b.arenaUsed : b.arenaUsed+n : b.arenaUsed+n]
			b.arenaUsed += n
		default:
			n = cap(s.Stack) // the arena is full: the slot's size
		}
	}
	s.Stack = s.Stack[:n]
	if n == 0 {
		return nil
	}
	t.local[0] = unix.Iovec{Base: &s.Stack[0]}
	t.local[0].SetLen(n)
	t.remote[0] = unix.RemoteIovec{Base: uintptr(sp), Len: n}
	got, err := readRemote(th.tid, &t.local[0], &t.remote[0])
	s.Stack = s.Stack[:got]
	if got < n {
		if err == nil {
			err = unix.EFAULT
		}
		s.StackErr = &MemoryError{PID: th.tid, Addr: sp, Len: n, Got: got, Err: err}
	}
	return nil
}
