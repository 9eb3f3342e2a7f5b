package unwind

import (
	"encoding/binary"
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/cfi"
	"codeberg.org/stacktop/stacktop/regs"
)

// fakeCFI is a CFIFinder over address ranges (ELF vaddr space).
type fakeCFI struct {
	ranges []cfiRange
}

type cfiRange struct {
	lo, hi uint64
	row    cfi.Row
}

func (f *fakeCFI) add(lo, hi uint64, row cfi.Row) {
	row.Start, row.End = lo, hi
	f.ranges = append(f.ranges, cfiRange{lo, hi, row})
}

func (f *fakeCFI) Lookup(pc uint64) (cfi.Row, error) {
	for _, r := range f.ranges {
		if pc >= r.lo && pc < r.hi {
			return r.row, nil
		}
	}
	return cfi.Row{}, cfi.ErrNoFDE
}

func cfaAt(reg uint16, off int64) cfi.Rule { return cfi.Rule{Kind: cfi.RuleCFA, Reg: reg, Offset: off} }
func savedAt(off int64) cfi.Rule           { return cfi.Rule{Kind: cfi.RuleOffset, Offset: off} }

var undefinedRA = cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: cfi.Rule{Kind: cfi.RuleUndefined}, RAReg: 16}

// codeMem serves code bytes at one address and the stack elsewhere.
type codeMem struct {
	addr uint64
	code []byte
}

func (c codeMem) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a < c.addr || a+uint64(len(p)) > c.addr+uint64(len(c.code)) {
		return 0, errors.New("unmapped")
	}
	return copy(p, c.code[a-c.addr:]), nil
}

// TestCFIDRAP walks through a DRAP function (CFA = [rbp-8], rbp saved at
// [rbp]: the expressions GCC emits and SFrame before V3 cannot hold), and
// through a caller whose CFA is based on rbx, which only a callee's CFI
// rule restores: callee-saved registers must survive the steps.
func TestCFIDRAP(t *testing.T) {
	s := newFakeStack(0x10000, 0x1000, binary.LittleEndian)
	s2 := s.high() - 0x100 // the caller's SP at its call to drap_frame
	s.put(s2+8, 0x1350)    // the caller's return address (CFA rbx+16)
	s.put(s2-8, 0x1250)    // drap_frame's return address
	b := s2 - 0x40         // drap_frame's rbp, below its realigned frame
	s.put(b, 0xdead0)      // the caller's rbp
	s.put(b-8, s2)         // the DRAP register (r10 = CFA), spilled
	lsp := b - 0x30        // drap_leaf's SP
	s.put(lsp, s2)         // rbx as the caller had it, saved by drap_leaf
	s.put(lsp+8, 0x1150)   // drap_leaf's return address

	var c fakeCFI
	c.add(0x1000, 0x1100, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 16), RA: savedAt(-8), RAReg: 16,
		Regs: []cfi.RegRule{{Reg: 3, Rule: savedAt(-16)}}})
	c.add(0x1100, 0x1200, cfi.Row{
		CFA: cfi.Rule{Kind: cfi.RuleCFAExpression, Expr: []byte{0x76, 0x78, 0x06}}, // breg6 -8; deref
		RA:  savedAt(-8), RAReg: 16,
		Regs: []cfi.RegRule{{Reg: 6, Rule: cfi.Rule{Kind: cfi.RuleExpression, Expr: []byte{0x76, 0x00}}}}, // breg6 0
	})
	c.add(0x1200, 0x1300, cfi.Row{CFA: cfaAt(3, 16), RA: savedAt(-8), RAReg: 16})
	c.add(0x1300, 0x1400, undefinedRA)
	mods := NewModuleList(Module{Start: 0x1000, End: 0x2000, CFI: &c})

	r := amd64Regs(0x1010, lsp, b)
	r.Put(3, 0x999) // drap_leaf's own use of rbx
	st := Walk(r, s.window(), mods, Options{Stack: s.bounds(), NoFramePointer: true})
	checkFrames(t, st, []wantFrame{
		{0x1010, lsp, MethodRegs},
		{0x1150, lsp + 16, MethodCFI},
		{0x1250, s2, MethodCFI},
		{0x1350, s2 + 16, MethodCFI},
	})
	checkStop(t, st, nil, 0)
}

// TestCFIRegUnknownFallsBack: a CFI rule needing a register the frame does
// not know leaves the step to frame pointers.
func TestCFIRegUnknownFallsBack(t *testing.T) {
	s := newFakeStack(0x10000, 0x1000, binary.LittleEndian)
	fp := s.high() - 0x80
	s.put(fp, 0)
	s.put(fp+8, 0x1350)
	var c fakeCFI
	c.add(0x1000, 0x1100, cfi.Row{CFA: cfaAt(12, 16), RA: savedAt(-8), RAReg: 16}) // r12 unknown
	mods := NewModuleList(Module{Start: 0x1000, End: 0x2000, CFI: &c})
	st := Walk(amd64Regs(0x1010, fp-0x20, fp), s.window(), mods, Options{Stack: s.bounds()})
	checkFrames(t, st, []wantFrame{{0x1010, 0, MethodRegs}, {0x1350, fp + 16, MethodFP}})
}

// TestSignalFrameAMD64: a handler returns to glibc's __restore_rt
// (recognised by its code); the interrupted frame, a function at its first
// instruction, comes from the sigcontext with an exact PC, and its caller
// from its CFI row at that exact PC.
func TestSignalFrameAMD64(t *testing.T) {
	s := newFakeStack(0x10000, 0x2000, binary.LittleEndian)
	x := s.high() - 0x100 // the interrupted SP
	s.put(x, 0x1350)      // the interrupted function's return address
	h := s.low + 0x400    // the handler's SP
	s.put(h, 0x2000)      // pretcode: the trampoline
	uc := h + 8
	mc := uc + amd64MContext
	vals := map[int]uint64{8: 0x108, 15: 0x115, 5: 0x105, 6: 0xb9, 3: 0xb3, 0: 0xa0}
	for i, n := range amd64SigcontextRegs {
		s.put(mc+8*uint64(i), vals[n])
	}
	s.put(mc+8*16, 0x1205) // rip
	s.put(mc+8*15, x)      // rsp, written explicitly
	win := s.window()
	win.Fallback = codeMem{0x2000, sigreturnAMD64}

	var c fakeCFI
	c.add(0x1000, 0x1100, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: savedAt(-8), RAReg: 16})
	// Starts at the interrupted PC: a PC-1 lookup would miss it.
	c.add(0x1205, 0x1280, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: savedAt(-8), RAReg: 16})
	c.add(0x1300, 0x1400, undefinedRA)
	mods := NewModuleList(Module{Start: 0x1000, End: 0x3000, CFI: &c})

	st := Walk(amd64Regs(0x1010, h, 0), win, mods, Options{Stack: s.bounds(), NoFramePointer: true})
	want := []struct {
		pc, sp uint64
		m      Method
		exact  bool
	}{
		{0x1010, h, MethodRegs, true},
		{0x2000, uc, MethodCFI, false},
		{0x1205, x, MethodSignal, true},
		{0x1350, x + 8, MethodCFI, false},
	}
	checkSignalFrames(t, st, want)
}

// TestSignalFrameARM64: the same through the vDSO's __kernel_rt_sigreturn,
// with the interrupted code a leaf whose return address is still in x30
// (only usable because the signal frame restored every register).
func TestSignalFrameARM64(t *testing.T) {
	s := newFakeStack(0x10000, 0x2000, binary.LittleEndian)
	y := s.high() - 0x100 // the interrupted SP
	u := s.low + 0x400    // SP in the trampoline: struct rt_sigframe
	sc := u + arm64SigContext + 8
	for n := 0; n <= 30; n++ {
		s.put(sc+8*uint64(n), 0x1000+uint64(n))
	}
	s.put(sc+8*30, 0x1350) // x30: the leaf's return address
	s.put(sc+8*31, y)      // sp
	s.put(sc+8*32, 0x1205) // pc
	win := s.window()
	win.Fallback = codeMem{0x2000, sigreturnARM64}

	leaf := cfi.Row{CFA: cfaAt(regs.ARM64SP, 0), RA: cfi.Rule{Kind: cfi.RuleSameValue}, RAReg: 30}
	var c fakeCFI
	c.add(0x1000, 0x1100, leaf) // the handler, a leaf too: RA in x30
	c.add(0x1205, 0x1280, leaf)
	c.add(0x1300, 0x1400, cfi.Row{CFA: cfaAt(regs.ARM64SP, 0), RA: cfi.Rule{Kind: cfi.RuleUndefined}, RAReg: 30})
	mods := NewModuleList(Module{Start: 0x1000, End: 0x3000, CFI: &c})

	r := regs.Set{Arch: regs.ARM64, PC: 0x1010}
	r.Put(regs.ARM64SP, u)
	r.Put(regs.ARM64LR, 0x2000)
	st := Walk(r, win, mods, Options{Stack: s.bounds(), NoFramePointer: true})
	checkSignalFrames(t, st, []struct {
		pc, sp uint64
		m      Method
		exact  bool
	}{
		{0x1010, u, MethodRegs, true},
		{0x2000, u, MethodCFI, false},
		{0x1205, y, MethodSignal, true},
		{0x1350, y, MethodCFI, false},
	})
}

func checkSignalFrames(t *testing.T, st Stack, want []struct {
	pc, sp uint64
	m      Method
	exact  bool
}) {
	t.Helper()
	if len(st.Frames) != len(want) {
		t.Errorf("got %d frames, want %d", len(st.Frames), len(want))
	}
	for i := 0; i < len(st.Frames) && i < len(want); i++ {
		f, w := st.Frames[i], want[i]
		if f.PC != w.pc || f.SP != w.sp || f.Method != w.m || f.Exact != w.exact {
			t.Errorf("frame %d = %+v, want %+v", i, f, w)
		}
	}
	if !st.Complete {
		t.Errorf("walk not complete: %v", st.Err)
	}
}

// TestSignalFrameUnreadable: a trampoline whose signal frame cannot be
// read stops the walk with an error, never a bogus frame.
func TestSignalFrameUnreadable(t *testing.T) {
	s := newFakeStack(0x10000, 0x100, binary.LittleEndian)
	h := s.high() - 0x10
	s.put(h, 0x2000)
	win := s.window()
	win.Fallback = codeMem{0x2000, sigreturnAMD64}
	var c fakeCFI
	c.add(0x1000, 0x1100, cfi.Row{CFA: cfaAt(regs.AMD64RSP, 8), RA: savedAt(-8), RAReg: 16})
	mods := NewModuleList(Module{Start: 0x1000, End: 0x3000, CFI: &c})
	st := Walk(amd64Regs(0x1010, h, 0), win, mods, Options{NoFramePointer: true})
	if st.Complete || !errors.Is(st.Err, ErrMemory) || len(st.Frames) != 2 {
		t.Errorf("frames %d complete %v err %v, want 2 frames and ErrMemory", len(st.Frames), st.Complete, st.Err)
	}
}
