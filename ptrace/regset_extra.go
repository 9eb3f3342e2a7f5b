//go:build linux

package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/regs"
)

// Register sets beyond NT_PRSTATUS that the unwinders need on some
// architectures: s390x floating-point registers (NT_PRFPREG), where GCC
// keeps the frame pointer or return address of leaf functions, and the
// aarch64 pointer-authentication masks (NT_ARM_PAC_MASK).

// ErrNotFrozen: the request needs every thread held (Process.Freeze).
var ErrNotFrozen = errors.New("ptrace: process is not frozen")

// Note types of PTRACE_GETREGSET (linux/elf.h).
const (
	ntPRFPREG     = 2
	ntARMPACMask  = 0x406
	fpregsMaxSize = 512 // larger than any architecture's NT_PRFPREG
)

// heldThread returns th when it is held in a frozen process.
func (p *Process) heldThread(tid int) (*thread, error) {
	if err := p.usable(); err != nil {
		return nil, err
	}
	if !p.frozen {
		return nil, ErrNotFrozen
	}
	th := p.threads[tid]
	if th == nil {
		if p.seen[tid] {
			return nil, ErrThreadExited
		}
		return nil, ErrUnknownThread
	}
	if th.state != stateHeld {
		return nil, ErrNotFrozen
	}
	return th, nil
}

// getRegsetInto reads regset note of tid into buf and returns the bytes
// the kernel wrote.
func getRegsetInto(tid int, note uintptr, buf []byte) ([]byte, error) {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	if err := ptraceReq(unix.PTRACE_GETREGSET, tid, note, uintptr(unsafe.Pointer(&iov))); err != nil {
		return nil, err
	}
	return buf[:iov.Len], nil
}

// FPRegs adds thread tid's floating-point registers to s where the
// architecture gives them DWARF numbers the unwinders use: on s390x the
// FPRs f0-f15 as DWARF 16-31. On other architectures it does nothing. The
// process must be frozen.
func (p *Process) FPRegs(tid int, s *regs.Set) error {
	if !fprsInDWARF {
		return nil
	}
	var err error
	if e := p.tr.do(func() {
		var th *thread
		if th, err = p.heldThread(tid); err != nil {
			return
		}
		var raw []byte
		var buf [fpregsMaxSize]byte
		if raw, err = getRegsetInto(th.tid, ntPRFPREG, buf[:]); err != nil {
			err = fmt.Errorf("thread %d: PTRACE_GETREGSET NT_PRFPREG: %w", tid, err)
			return
		}
		err = convertFPRegs(raw, s)
	}); e != nil {
		return e
	}
	return err
}

// PACMask returns the instruction-address mask of NT_ARM_PAC_MASK on
// arm64: the bits a pointer-authentication code occupies in return
// addresses, for unwind.Options.PACMask. The mask is the same for every
// thread and for the process's lifetime: read it once. It is 0 when the
// CPU or kernel has no pointer authentication, and on other
// architectures. When the process is not frozen one thread is stopped for
// the read and resumed, like Sample does.
func (p *Process) PACMask() (uint64, error) {
	if !hasPAC {
		return 0, nil
	}
	var mask uint64
	var err error
	if e := p.tr.do(func() { mask, err = p.pacMask() }); e != nil {
		return 0, e
	}
	return mask, err
}

func (p *Process) pacMask() (uint64, error) {
	if err := p.usable(); err != nil {
		return 0, err
	}
	var th *thread
	for _, t := range p.threads {
		if t.state == stateHeld {
			th = t
			break
		}
		if th == nil && t.state != stateNewborn && !(t.tid == p.pid && p.leaderZombie) {
			th = t
		}
	}
	if th == nil {
		return 0, ErrThreadExited
	}
	if th.state != stateHeld {
		if th.state == stateRunning || th.state == stateListening {
			ptraceReq(unix.PTRACE_INTERRUPT, th.tid, 0, 0)
		}
		if err := p.waitHeld(th); err != nil {
			return 0, err
		}
		if !p.frozen {
			defer p.resume(th)
		}
	}
	var buf [16]byte // struct user_pac_mask { data_mask, insn_mask }
	raw, err := getRegsetInto(th.tid, ntARMPACMask, buf[:])
	switch {
	case err == unix.EINVAL || err == unix.ENODEV:
		return 0, nil // no pointer authentication
	case err != nil:
		return 0, fmt.Errorf("thread %d: PTRACE_GETREGSET NT_ARM_PAC_MASK: %w", th.tid, err)
	case len(raw) < 16:
		return 0, fmt.Errorf("thread %d: NT_ARM_PAC_MASK: %d bytes, want 16", th.tid, len(raw))
	}
	return *(*uint64)(unsafe.Pointer(&raw[8])), nil
}

// s390xFPRDwarf lists the FPR held by DWARF registers 16-31, in the order
// of the s390x ELF ABI supplement: f0,f2,f4,f6,f1,f3,f5,f7,f8,f10,f12,f14,
// f9,f11,f13,f15.
var s390xFPRDwarf = [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}

// putS390XFPRs stores the FPRs of an s390_fp_regs as DWARF 16-31.
func putS390XFPRs(raw []byte, order binary.ByteOrder, s *regs.Set) error {
	if len(raw) < 8+16*8 {
		return fmt.Errorf("NT_PRFPREG: %d bytes, want %d", len(raw), 8+16*8)
	}
	for i, f := range s390xFPRDwarf {
		s.Put(16+i, order.Uint64(raw[8+8*f:]))
	}
	return nil
}
