package backchain

import (
	"encoding/binary"
	"math"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// Offsets in the s390x register save area (struct stack_frame_user) and the
// vDSO wrapper frame (struct stack_frame_vdso_wrapper).
const (
	OffBackChain     = 0   // address of the caller's frame; 0 in the outermost frame
	OffR14           = 112 // saved r14: the return address of the frame's owner
	OffR15           = 120 // saved r15
	FrameSize        = 160 // STACK_FRAME_USER_OVERHEAD: the register save area
	VDSOReturnOffset = 160 // stack_frame_vdso_wrapper.return_address
	VDSOFrameSize    = 168 // STACK_FRAME_VDSO_OVERHEAD
)

// Unwinder steps s390x frames through the back chain. The zero value
// works; its fields add knowledge of the address space.
type Unwinder struct {
	// InVDSO reports whether pc is in the vDSO's text, where the entry
	// wrapper frame has a zero back chain and its return address at
	// offset 160. nil means no PC is.
	InVDSO func(pc uint64) bool
	// IsCode reports whether a return address lies in executable code. In
	// the topmost frame a saved return address it rejects makes the step
	// use the live r14 instead. nil accepts any non-zero even address.
	IsCode func(pc uint64) bool
	// FuncAt gives the [start, end) of the function holding a PC (from
	// the module's symbols). With it, the topmost step prefers the live
	// r14 when it is a return address into another function after a call
	// instruction and differs from the saved one (leaf.go). nil: no such
	// check.
	FuncAt func(pc uint64) (start, end uint64, ok bool)
}

// Method reports unwind.MethodBackChain.
func (Unwinder) Method() unwind.Method { return unwind.MethodBackChain }

var _ unwind.Stepper = Unwinder{}

// Step returns the caller of the frame whose registers are cur: its PC
// (the return address) and its SP (r15). The caller's other registers,
// r11 included, cannot be recovered from the back chain and are left
// invalid. A zero back chain outside the vDSO ends the walk with
// unwind.ErrOutermost.
func (u Unwinder) Step(cur *regs.Set, topmost bool, mem unwind.Memory, order binary.ByteOrder) (regs.Set, error) {
	if cur.Arch != regs.S390X {
		return regs.Set{}, stepError(cur.PC, 0, "arch "+cur.Arch.String(), unwind.ErrArch, nil)
	}
	sp, ok := cur.Get(regs.S390XSP)
	if !ok {
		return regs.Set{}, stepError(cur.PC, 0, "r15", unwind.ErrRegUnknown, nil)
	}
	if sp%8 != 0 {
		return regs.Set{}, stepError(cur.PC, sp, "stack pointer", unwind.ErrMisaligned, nil)
	}
	if order == nil {
		order = binary.BigEndian
	}
	rd := reader{mem: mem, order: order, pc: cur.PC}

	bc, err := rd.word(sp+OffBackChain, "back chain")
	if err != nil {
		return regs.Set{}, err
	}
	var ra, spCaller uint64
	switch {
	case bc == 0 && u.InVDSO != nil && u.InVDSO(cur.PC):
		// The vDSO wrapper: 168 bytes, the return address behind the
		// save area, the caller's SP right above.
		if ra, err = rd.word(sp+VDSOReturnOffset, "vdso return address"); err != nil {
			return regs.Set{}, err
		}
		spCaller = sp + VDSOFrameSize
	case bc == 0:
		if topmost {
			// A leaf without a frame whose caller is the outermost
			// function: SP is still the caller's.
			if next, ok := u.liveR14(cur, sp); ok {
				return next, nil
			}
		}
		return regs.Set{}, unwind.ErrOutermost
	default:
		if bc%8 != 0 {
			return regs.Set{}, stepError(cur.PC, bc, "back chain", unwind.ErrMisaligned, nil)
		}
		if bc > math.MaxUint64-FrameSize {
			return regs.Set{}, stepError(cur.PC, bc, "back chain", unwind.ErrMemory, nil)
		}
		if ra, err = rd.word(bc+OffR14, "saved r14"); err != nil {
			return regs.Set{}, err
		}
		spCaller = bc
	}
	if topmost && bc != 0 {
		if next, ok := u.leafR14(cur, mem, sp, bc, ra); ok {
			return next, nil
		}
	}
	if !u.plausible(ra) {
		if topmost {
			// The function did not store r14: a leaf (GCC allocates a
			// frame and stores the back chain in leaves too, but saves
			// r14 only when it calls), or a function still in its
			// prologue. Its return address is live; its caller's SP is
			// the back chain it stored.
			if next, ok := u.liveR14(cur, spCaller); ok {
				return next, nil
			}
		}
		return regs.Set{}, stepError(cur.PC, ra, "return address", unwind.ErrBadRA, nil)
	}
	return caller(ra, spCaller), nil
}

// liveR14 is the caller of a topmost function that has not stored its
// return address: PC from r14, SP as given.
func (u Unwinder) liveR14(cur *regs.Set, sp uint64) (regs.Set, bool) {
	ra, ok := cur.Get(regs.S390XRA)
	if !ok || !u.plausible(ra) || ra == cur.PC {
		return regs.Set{}, false
	}
	return caller(ra, sp), true
}

// plausible: s390x instructions are 2-byte aligned, and zero is no code.
func (u Unwinder) plausible(ra uint64) bool {
	if ra == 0 || ra%2 != 0 {
		return false
	}
	return u.IsCode == nil || u.IsCode(ra)
}

func caller(pc, sp uint64) regs.Set {
	n := regs.Set{Arch: regs.S390X, PC: pc}
	n.Put(regs.S390XSP, sp)
	return n
}

// reader reads target words for one step.
type reader struct {
	mem   unwind.Memory
	order binary.ByteOrder
	pc    uint64 // of the frame being stepped, for errors
}

func (r *reader) word(addr uint64, what string) (uint64, error) {
	// Reads inside a captured window need no interface call, and no
	// buffer escaping to the heap.
	if sw, ok := r.mem.(*unwind.StackWindow); ok {
		if v, ok := sw.Word(addr, r.order); ok {
			return v, nil
		}
	}
	return r.slowWord(addr, what)
}

// slowWord reads through the Memory interface; its buffer escapes, so it
// is kept out of the fast path.
func (r *reader) slowWord(addr uint64, what string) (uint64, error) {
	if r.mem == nil || addr > math.MaxInt64-8 {
		return 0, stepError(r.pc, addr, what, unwind.ErrMemory, nil)
	}
	var buf [8]byte
	n, err := r.mem.ReadAt(buf[:], int64(addr))
	if n != len(buf) {
		return 0, stepError(r.pc, addr, what, unwind.ErrMemory, err)
	}
	return r.order.Uint64(buf[:]), nil
}

// stepError is a failed step in package unwind's vocabulary; the walker
// adds the frame's index.
func stepError(pc, addr uint64, what string, sentinel, cause error) *unwind.StepError {
	return &unwind.StepError{PC: pc, Method: unwind.MethodBackChain, Addr: addr, What: what, Err: sentinel, Cause: cause}
}
