package backchain

import (
	"testing"

	"codeberg.org/stacktop/stacktop/unwind"
)

// codeAt serves the text of the fake program: BRASL before b's call of c,
// zeroes elsewhere.
type codeAt struct{ text []byte }

func (c codeAt) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a < textLo || a-textLo+uint64(len(p)) > uint64(len(c.text)) {
		return 0, unwind.ErrOutsideWindow
	}
	return copy(p, c.text[a-textLo:]), nil
}

// Functions of the fake program: main, a, b and the leaf c.
func leafFuncs(pc uint64) (uint64, uint64, bool) {
	for _, f := range [][2]uint64{{0, 0x180}, {0x180, 0x280}, {0x280, 0x400}, {0x400, 0x500}} {
		if pc >= textLo+f[0] && pc < textLo+f[1] {
			return textLo + f[0], textLo + f[1], true
		}
	}
	return 0, 0, false
}

// main -> a -> b -> c, c a leaf stopped at c+0x10 that saved no r14: with
// no frame of its own (SP is b's), with a frame whose caller's save slot
// is stale, and with a frame whose caller's save slot was never written
// (zero: b's SP is still c's back chain, not c's SP). The back chain alone
// loses b in the first two; r14 has it in all three.
func TestTopmostLeafR14(t *testing.T) {
	const raB = textLo + 0x3f0 // c's return address, in b, after a BRASL
	text := make([]byte, 0x1000)
	copy(text[raB-6-textLo:], []byte{0xc0, 0xe5, 0, 0, 0, 0x08}) // brasl %r14,c
	mods := unwind.NewModuleList(unwind.Module{Start: textLo, End: textHi, Path: "exe"})
	bounds := unwind.StackBounds{Low: low, High: low + 0x1000}

	for _, c := range []struct {
		framed bool
		slot   uint64 // b's r14 save slot
	}{{false, 0}, {true, textLo + 0x300}, {true, 0}} {
		framed := c.framed
		s := newStack(low, 0x1000)
		spB := chain(s)
		sp := spB
		if framed {
			sp = spB - FrameSize
			s.put(sp, spB)
			s.put(spB+OffR14, c.slot) // an older return into b, or nothing
		}
		r := s390xRegs(textLo+0x410, sp, raB)
		win := s.window()
		win.Fallback = codeAt{text}

		old := unwind.Walk(r, win, mods, unwind.Options{Fallback: Unwinder{IsCode: isCode}, Stack: bounds})
		if len(old.Frames) > 1 && old.Frames[1].PC == raB && c.slot != 0 {
			t.Errorf("framed=%v: b found without FuncAt; the test does not test the rule", framed)
		}

		st := unwind.Walk(r, win, mods, unwind.Options{Fallback: Unwinder{IsCode: isCode, FuncAt: leafFuncs}, Stack: bounds})
		want := []uint64{textLo + 0x410, raB, textLo + 0x200, textLo + 0x100}
		if !st.Complete || len(st.Frames) != len(want) {
			t.Fatalf("framed=%v: complete=%v err=%v frames=%+v", framed, st.Complete, st.Err, st.Frames)
		}
		for i, f := range st.Frames {
			if f.PC != want[i] {
				t.Errorf("framed=%v: frame %d pc %#x, want %#x", framed, i, f.PC, want[i])
			}
		}
		if st.Frames[1].SP != spB {
			t.Errorf("framed=%v: b's SP %#x, want %#x", framed, st.Frames[1].SP, spB)
		}

		// Without a call instruction before r14 the rule does not fire.
		win.Fallback = codeAt{make([]byte, 0x1000)}
		st = unwind.Walk(r, win, mods, unwind.Options{Fallback: Unwinder{IsCode: isCode, FuncAt: leafFuncs}, Stack: bounds})
		if len(st.Frames) > 1 && st.Frames[1].PC == raB {
			if c.slot != 0 {
				t.Errorf("framed=%v: r14 taken without a call before it", framed)
			}
		}
	}
}

func TestAfterCall(t *testing.T) {
	for _, c := range []struct {
		code []byte // the 6 bytes before the return address
		want bool
	}{
		{[]byte{0xc0, 0xe5, 0, 0, 0, 8}, true},    // brasl %r14,.
		{[]byte{0, 0, 0xa7, 0xe5, 0, 8}, true},    // bras %r14,.
		{[]byte{0, 0, 0x4d, 0xe0, 0x10, 0}, true}, // bas %r14,0(%r1)
		{[]byte{0, 0, 0, 0, 0x0d, 0xe1}, true},    // basr %r14,%r1
		{[]byte{0, 0, 0, 0, 0x07, 0xfe}, false},   // br %r14
		{[]byte{0xc0, 0xf4, 0, 0, 0, 8}, false},   // jg (brcl 15)
	} {
		text := make([]byte, 0x100)
		copy(text[0x40:], c.code)
		if got := afterCall(codeAt{text}, textLo+0x46); got != c.want {
			t.Errorf("afterCall(% x) = %v, want %v", c.code, got, c.want)
		}
	}
}
