package backchain

import (
	"math"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// A topmost leaf that allocated no frame (it needs no stack) leaves r15 at
// its caller's frame: the back chain read there is the caller's, and the
// saved r14 behind it is the caller's own return address. The step would
// return the caller's caller and lose the caller. A leaf that allocated a
// frame but saved no r14 reads a stale slot of its caller's save area
// instead (an older return address into the caller).
//
// The live r14 is the caller's return address when all of these hold:
// it is a plausible code address, not the PC; the instruction before it
// is a call (BRASL, BRAS, BASR, BAS, BALR); it lies in another function
// than the PC (a function that has called something has r14 pointing into
// itself); and it differs from the saved one (a function past its
// prologue saved r14 there, and the ordinary step agrees).
//
// The caller's SP then depends on whether the leaf allocated a frame: if
// the saved (stale) return address is in the same function as r14, or is
// no return address at all (a slot never written: under qemu, a spinning
// leaf with a frame whose caller had called nothing else), the leaf's
// back chain is the caller's SP; otherwise the leaf has no frame and the
// caller's SP is the current one.

// leafR14 returns the caller of the topmost frame from r14 when the rule
// above says so. bc is the back chain at SP, saved the r14 read behind it.
func (u Unwinder) leafR14(cur *regs.Set, mem unwind.Memory, sp, bc, saved uint64) (regs.Set, bool) {
	if u.FuncAt == nil {
		return regs.Set{}, false
	}
	r14, ok := cur.Get(regs.S390XRA)
	if !ok || r14 == saved || r14 == cur.PC || !u.plausible(r14) || r14 < 6 || r14 > math.MaxInt64 {
		return regs.Set{}, false
	}
	fs, _, ok := u.FuncAt(cur.PC)
	if !ok {
		return regs.Set{}, false
	}
	cs, ce, ok := u.FuncAt(r14 - 1)
	if !ok || cs == fs || r14-1 < cs || r14-1 >= ce {
		return regs.Set{}, false
	}
	if !afterCall(mem, r14) {
		return regs.Set{}, false
	}
	if ss, _, ok := u.FuncAt(saved - 1); ok && saved != 0 && ss == cs {
		return caller(r14, bc), true // a leaf frame; the slot was stale
	}
	if !u.plausible(saved) {
		// A leaf frame over a save slot its caller's callees never
		// wrote: without a frame, the slot would be the caller's own
		// saved return address (it has called, so it saved one).
		return caller(r14, bc), true
	}
	return caller(r14, sp), true // a leaf without a frame
}

// afterCall reports whether a call instruction ends right before ra:
// BRASL (6 bytes, C0x5), BRAS (4, A7x5), BAS (4, 4D), BASR (2, 0D) or
// BALR (2, 05). z/Architecture code is big-endian on every host.
func afterCall(mem unwind.Memory, ra uint64) bool {
	var b [6]byte
	if mem == nil {
		return false
	}
	if n, _ := mem.ReadAt(b[:], int64(ra-6)); n != len(b) {
		return false
	}
	switch {
	case b[0] == 0xc0 && b[1]&0x0f == 0x05: // BRASL r1,ri2
		return true
	case b[2] == 0xa7 && b[3]&0x0f == 0x05: // BRAS r1,ri2
		return true
	case b[2] == 0x4d: // BAS r1,d2(x2,b2)
		return true
	case b[4] == 0x0d || b[4] == 0x05: // BASR, BALR r1,r2
		return true
	}
	return false
}
