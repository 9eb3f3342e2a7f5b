package unwind

import (
	"encoding/binary"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

// leafMem is a Memory of a stack window and one code region.
type leafMem struct {
	stack *StackWindow
	base  uint64
	code  []byte
}

func (m *leafMem) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a >= m.base && a-m.base+uint64(len(p)) <= uint64(len(m.code)) {
		return copy(p, m.code[a-m.base:]), nil
	}
	return m.stack.ReadAt(p, off)
}

// a64Code is the program's text with a BL before each return address of
// arm64Program (and a NOP elsewhere).
func a64Code(calls ...uint64) []byte {
	code := make([]byte, a64End-a64Start)
	for i := 0; i < len(code); i += 4 {
		binary.LittleEndian.PutUint32(code[i:], 0xd503201f) // nop
	}
	for _, ra := range calls {
		binary.LittleEndian.PutUint32(code[ra-4-a64Start:], 0x94000010) // bl
	}
	return code
}

// a64Funcs is FuncAt for _start, main, foo and bar.
func a64Funcs(pc uint64) (uint64, uint64, bool) {
	for _, f := range [][2]uint64{{a64Start, a64Main}, {a64Main, a64Foo}, {a64Foo, a64Bar}, {a64Bar, a64End}} {
		if f[0] <= pc && pc < f[1] {
			return f[0], f[1], true
		}
	}
	return 0, 0, false
}

// An arm64 leaf without a frame record, no unwind tables: x29 is still
// foo's record, so frame pointers alone go from bar to main and lose foo.
// The link-register rule takes foo from x30.
func TestARM64LeafLinkRegister(t *testing.T) {
	for _, pac := range []bool{false, true} {
		s, r, want := arm64Program(false, pac)
		mem := &leafMem{stack: s.window(), base: a64Start, code: a64Code(a64Start+0x20, a64Main+0x30, a64Foo+0x40)}
		mods := NewModuleList(a64Module(nil))

		// Without FuncAt: the old walk, foo lost.
		st := Walk(r, mem, mods, Options{Stack: s.bounds(), PACMask: pacMask})
		if len(st.Frames) != 3 || st.Frames[1].PC != a64Main+0x30 {
			t.Errorf("pac=%v: without FuncAt got %d frames, frame 1 %#x; want bar, main, _start", pac, len(st.Frames), st.Frames[1].PC)
		}

		st = Walk(r, mem, mods, Options{Stack: s.bounds(), PACMask: pacMask, FuncAt: a64Funcs})
		want[1].method, want[1].sp = MethodLinkReg, 0
		want[2].method, want[3].method = MethodFP, MethodFP
		checkFrames(t, st, want)
		checkStop(t, st, nil, 0)
	}
}

// The rule must not fire where x30 is not the caller's return address.
func TestARM64LeafLinkRegisterRefused(t *testing.T) {
	fpOnly := func(want []wantFrame) []wantFrame {
		for i := 1; i < len(want); i++ {
			want[i].method = MethodFP
		}
		return want
	}
	t.Run("framed", func(t *testing.T) {
		// bar saved x30 in its own frame record: the FP step agrees.
		s, r, want := arm64Program(true, true)
		mem := &leafMem{stack: s.window(), base: a64Start, code: a64Code(a64Start+0x20, a64Main+0x30, a64Foo+0x40)}
		st := Walk(r, mem, NewModuleList(a64Module(nil)), Options{Stack: s.bounds(), PACMask: pacMask, FuncAt: a64Funcs})
		checkFrames(t, st, fpOnly(want))
	})
	t.Run("no call before x30", func(t *testing.T) {
		s, r, _ := arm64Program(false, false)
		mem := &leafMem{stack: s.window(), base: a64Start, code: a64Code(a64Start+0x20, a64Main+0x30)}
		st := Walk(r, mem, NewModuleList(a64Module(nil)), Options{Stack: s.bounds(), FuncAt: a64Funcs})
		if len(st.Frames) < 2 || st.Frames[1].Method == MethodLinkReg {
			t.Errorf("x30 after a non-call taken as the caller: %+v", st.Frames)
		}
	})
	t.Run("x30 into the same function", func(t *testing.T) {
		// bar has called something that returned: x30 is inside bar.
		s, r, _ := arm64Program(false, false)
		r.Put(regs.ARM64LR, a64Bar+4)
		mem := &leafMem{stack: s.window(), base: a64Start, code: a64Code(a64Start+0x20, a64Main+0x30, a64Foo+0x40, a64Bar+4)}
		st := Walk(r, mem, NewModuleList(a64Module(nil)), Options{Stack: s.bounds(), FuncAt: a64Funcs})
		if len(st.Frames) < 2 || st.Frames[1].Method == MethodLinkReg {
			t.Errorf("x30 into the PC's own function taken as the caller: %+v", st.Frames)
		}
	})
}

func TestIsARM64Call(t *testing.T) {
	for _, c := range []struct {
		insn uint32
		want bool
	}{
		{0x94000010, true},  // bl
		{0x97ffffff, true},  // bl backwards
		{0xd63f0020, true},  // blr x1
		{0xd63f081f, true},  // blraaz x0
		{0xd73f0821, true},  // blraa x1, x1
		{0xd65f03c0, false}, // ret
		{0xd61f0020, false}, // br x1
		{0x14000010, false}, // b
		{0xd503201f, false}, // nop
	} {
		if got := isARM64Call(c.insn); got != c.want {
			t.Errorf("isARM64Call(%#08x) = %v, want %v", c.insn, got, c.want)
		}
	}
}
