package unwind

import (
	"encoding/binary"

	"codeberg.org/stacktop/stacktop/regs"
)

// Frame 0 without unwind tables on a link-register architecture.
//
// A leaf function built with frame pointers but without a frame record of
// its own (-momit-leaf-frame-pointer, the default) leaves x29 pointing at
// its caller's record, and its caller's return address in x30. Following
// x29 from there yields the caller's caller: the caller is lost. The
// registers of frame 0 are all known, so the walker can take the caller
// from x30 when that is safe to believe:
//
//   - x30 (PAC stripped) is 4-aligned, not the PC, and inside a module;
//   - the instruction before it is a call (bl, blr, blraa/blrab and their
//     zero-modifier forms): x30 was written by a call, not used as a
//     scratch register;
//   - it returns into another function than the PC's (Options.FuncAt): in
//     a function that has called something, x30 points into itself;
//   - the function has not saved it: the frame record at x29 does not hold
//     it (a function past its prologue, not yet having called anything,
//     has saved x30 there, and the frame-pointer step finds the same
//     caller).
//
// The caller keeps frame 0's SP and FP: a leaf does not change x29, and
// the caller's frame-pointer step reads its own record from there.

// leafStep applies the rule to the topmost frame cur; it reports whether
// next is its caller.
func (w *Walker) leafStep(cur, next *regs.Set, mod *Module) bool {
	if cur.Arch != regs.ARM64 || w.opts.FuncAt == nil || w.mods == nil {
		return false
	}
	lr, ok := cur.Get(regs.ARM64LR)
	if !ok {
		return false
	}
	lr &^= w.opts.PACMask
	sp, _ := cur.Get(regs.ARM64SP)
	fp, fpOK := cur.Get(regs.ARM64FP)
	if !w.plausibleLR(cur.PC, lr) {
		return false
	}
	if fpOK && fp >= sp && fp%8 == 0 {
		if saved, f := w.word(fp + 8); f.err == nil && saved&^w.opts.PACMask == lr {
			return false // saved in its frame record: the FP step agrees
		}
	}
	if f := w.checkSP(sp, sp, true); f.err != nil {
		return false
	}
	reset(next, cur.Arch, lr)
	next.Put(regs.ARM64SP, sp)
	if fpOK {
		next.Put(regs.ARM64FP, fp)
	}
	return true
}

// plausibleLR checks the first three conditions above for a return
// address ra in the link register of the frame at pc.
func (w *Walker) plausibleLR(pc, ra uint64) bool {
	if ra == 0 || ra%4 != 0 || ra == pc || ra < 4 || ra > 1<<63 {
		return false
	}
	if _, ok := w.mods.ModuleAt(ra - 1); !ok {
		return false
	}
	fs, _, ok := w.opts.FuncAt(pc)
	if !ok {
		return false
	}
	cs, ce, ok := w.opts.FuncAt(ra - 1)
	if !ok || cs == fs || ra-1 < cs || ra-1 >= ce {
		return false
	}
	var insn [4]byte
	if n, _ := w.mem.ReadAt(insn[:], int64(ra-4)); n != len(insn) {
		return false
	}
	// A64 instructions are little-endian whatever the data byte order.
	return isARM64Call(binary.LittleEndian.Uint32(insn[:]))
}

// isARM64Call reports whether insn is a call: BL imm26, BLR Xn, or the
// pointer-authenticating BLRAA/BLRAB/BLRAAZ/BLRABZ.
func isARM64Call(insn uint32) bool {
	switch {
	case insn&0xfc000000 == 0x94000000: // BL
		return true
	case insn&0xfffffc1f == 0xd63f0000: // BLR
		return true
	case insn&0xfffff800 == 0xd63f0800: // BLRAAZ, BLRABZ (Rm = 11111)
		return true
	case insn&0xfffff800 == 0xd73f0800: // BLRAA, BLRAB
		return true
	}
	return false
}
