package unwind

import (
	"encoding/binary"
	"testing"

	"codeberg.org/stacktop/stacktop/cfi"
	"codeberg.org/stacktop/stacktop/regs"
)

// TestSignalFrameOnAltStack: the handler runs on an alternate signal stack
// (its own mapping), the code it interrupted on the thread's stack. The
// interrupted frames are bounded by their own stack (Options.StackOf), not
// by the alternate stack's bounds, which would reject every one of them.
func TestSignalFrameOnAltStack(t *testing.T) {
	s := newFakeStack(0x10000, 0x2000, binary.LittleEndian)
	alt := StackBounds{Low: s.low, High: s.low + 0x1000}
	own := StackBounds{Low: s.low + 0x1000, High: s.high()}
	x := s.high() - 0x100 // the interrupted SP, on the thread's stack
	s.put(x, 0x1350)      // the interrupted function's return address
	h := s.low + 0x400    // the handler's SP, on the alternate stack
	s.put(h, 0x2000)      // pretcode: the trampoline
	mc := h + 8 + amd64MContext
	for i := range amd64SigcontextRegs {
		s.put(mc+8*uint64(i), 0)
	}
	s.put(mc+8*16, 0x1205) // rip
	s.put(mc+8*15, x)      // rsp
	win := s.window()
	win.Fallback = codeMem{0x2000, sigreturnAMD64}

	var c fakeCFI
	c.add(0x1000, 0x1100, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: savedAt(-8), RAReg: 16})
	c.add(0x1205, 0x1280, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: savedAt(-8), RAReg: 16})
	c.add(0x1300, 0x1400, undefinedRA)
	mods := NewModuleList(Module{Start: 0x1000, End: 0x3000, CFI: &c})

	walk := func(stackOf StackFinder) Stack {
		return Walk(amd64Regs(0x1010, h, 0), win, mods, Options{Stack: alt, StackOf: stackOf, NoFramePointer: true})
	}
	st := walk(func(sp uint64) (StackBounds, bool) {
		if sp >= own.Low && sp < own.High {
			return own, true
		}
		return StackBounds{}, false
	})
	if !st.Complete || len(st.Frames) != 4 {
		t.Fatalf("with the thread's own stack bounds: complete %v, %d frames, err %v; want 4 frames, complete", st.Complete, len(st.Frames), st.Err)
	}
	// The bounds StackOf gives are the ones checked: too small ones stop
	// the walk at the interrupted frame's caller.
	st = walk(func(sp uint64) (StackBounds, bool) { return StackBounds{Low: x, High: x + 8}, true })
	checkStop(t, st, ErrOutsideStack, 2)
	// Without StackOf, the interrupted frames are walked unbounded.
	if st := walk(nil); !st.Complete || len(st.Frames) != 4 {
		t.Fatalf("without StackOf: complete %v, %d frames, err %v", st.Complete, len(st.Frames), st.Err)
	}
}

// TestZeroFPKeptIsNotTheEnd: frame 0 is in code with CFI that does not
// touch rbp; its caller has no unwind information and rbp is 0 only
// because nobody wrote it. That proves nothing: the walk is truncated
// (ErrZeroFP), not complete. A zero read from a frame record still ends
// the chain (TestAMD64FramePointer).
func TestZeroFPKeptIsNotTheEnd(t *testing.T) {
	s := newFakeStack(0x10000, 0x1000, binary.LittleEndian)
	sp := s.low + 0x100
	s.put(sp, 0x2010) // return address into the code without unwind info
	var c fakeCFI
	c.add(0x1000, 0x1100, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: savedAt(-8), RAReg: 16})
	mods := NewModuleList(
		Module{Start: 0x1000, End: 0x2000, CFI: &c},
		Module{Start: 0x2000, End: 0x3000, Path: "nocfi"},
	)
	st := Walk(amd64Regs(0x1010, sp, 0), s.window(), mods, Options{Stack: s.bounds()})
	if len(st.Frames) != 2 {
		t.Fatalf("%d frames, want 2", len(st.Frames))
	}
	checkStop(t, st, ErrZeroFP, 1)
}
