package unwind

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"

	"codeberg.org/stacktop/stacktop/cfi"
	"codeberg.org/stacktop/stacktop/regs"
)

// The s390x .eh_frame of cfi/testdata (big-endian, gcc 12 -O2, static):
// spin_thread -> spin_caller -> (jump2 -> jump1, tail calls) -> spin_here,
// the stack built as the code builds it (stmg %r14,%r15,112(%r15); lay
// %r15,-160(%r15)), walked by CFI alone.
func TestS390XCFIWalk(t *testing.T) {
	data, err := os.ReadFile("../cfi/testdata/s390x-static.eh_frame")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := cfi.Build(elf.EM_S390, cfi.Section{Name: ".eh_frame", Data: data, Addr: 0x108a2e8})
	if err != nil {
		t.Fatal(err)
	}
	const (
		spinHere  = 0x1000ac8
		raCaller  = 0x1000b4a // after spin_caller's brasl to jump2
		raThread  = 0x1000b7e // in spin_thread, after its call of spin_caller
		raStartTh = 0x1011900 // in start_thread
	)
	s := newFakeStack(0x3fff0000, 0x1000, binary.BigEndian)
	s0 := s.high() - 0x200 // spin_thread entered with this SP
	s.put(s0+112, raStartTh)
	s.put(s0+120, s0)
	s1 := s0 - 160 // spin_thread's frame; spin_caller entered with it
	s.put(s1+112, raThread)
	s.put(s1+120, s1)
	s2 := s1 - 160 // spin_caller's frame; the leaf's SP
	r := regs.Set{Arch: regs.S390X, PC: spinHere + 8}
	r.Put(regs.S390XSP, s2)
	r.Put(regs.S390XRA, raCaller)
	mods := NewModuleList(Module{Start: 0x1000000, End: 0x1090000, CFI: tab, Path: "tailcall-s390x"})

	for _, o := range []Options{
		{Stack: s.bounds()},
		{Stack: s.bounds(), Unwinders: []Method{MethodCFI}},
	} {
		st := Walk(r, s.window(), mods, o)
		checkFrames(t, st, []wantFrame{
			{spinHere + 8, s2, MethodRegs},
			{raCaller, s2, MethodCFI},
			{raThread, s1, MethodCFI},
			{raStartTh, s0, MethodCFI},
		})
		// start_thread's saved return address is a zero word of the fake
		// stack: the outermost frame.
		checkStop(t, st, nil, 0)
	}
}
