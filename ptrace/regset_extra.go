//go:build linux

package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"stacktop/regs"
)

// Register sets beyond NT_PRSTATUS that the unwinders need on some
// architectures: s390x floating-point registers (NT_PRFPREG), where GCC
// keeps the frame pointer or return address of leaf functions, and the
// aarch64 pointer-authentication masks (NT_ARM_PAC_MASK). Both are read
// from a frozen process, whose threads are all held in a ptrace-stop.

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
// addresses, for unwind.Options.PACMask. It is 0 when the CPU or kernel
// has no pointer authentication, and on other architectures. The process
// must be frozen.
func (p *Process) PACMask() (uint64, error) {
	if !hasPAC {
		return 0, nil
	}
	var mask uint64
	var err error
	if e := p.tr.do(func() {
		if err = p.usable(); err != nil {
			return
		}
		if !p.frozen {
			err = ErrNotFrozen
			return
		}
		for tid, th := range p.threads {
			if th.state != stateHeld {
				continue
			}
			var buf [16]byte // struct user_pac_mask { data_mask, insn_mask }
			raw, e := getRegsetInto(tid, ntARMPACMask, buf[:])
			switch {
			case e == unix.EINVAL || e == unix.ENODEV:
				mask = 0 // no pointer authentication
			case e != nil:
				err = fmt.Errorf("thread %d: PTRACE_GETREGSET NT_ARM_PAC_MASK: %w", tid, e)
			case len(raw) < 16:
				err = fmt.Errorf("thread %d: NT_ARM_PAC_MASK: %d bytes, want 16", tid, len(raw))
			default:
				mask = *(*uint64)(unsafe.Pointer(&raw[8]))
			}
			return
		}
		err = ErrNotFrozen
	}); e != nil {
		return 0, e
	}
	return mask, err
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
