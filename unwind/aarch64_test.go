package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// Non-PIE functions (Bias 0) for arm64 and s390x.
const (
	a64Start = 0x400000
	a64Main  = 0x400100
	a64Foo   = 0x400200
	a64Bar   = 0x400300
	a64End   = 0x400400

	// A PAC as Linux puts it in bits 48-54 for 48-bit VAs; the mask is
	// NT_ARM_PAC_MASK's insn_mask with TBI off.
	pacBits = 0x0023000000000000
	pacMask = 0xff7f000000000000
)

func mangled(r sframe.Row) sframe.Row { r.MangledRA = true; return r }

// arm64Rows: _start outermost; main, foo and (when barFramed) bar with
// stp x29,x30,[sp,#-16]! at +0 and mov x29,sp at +4; a leaf bar
// otherwise. pac marks every row but _start's as MangledRA (paciasp).
func arm64Rows(barFramed, pac bool) *fakeRows {
	m := func(r sframe.Row) sframe.Row {
		if pac {
			return mangled(r)
		}
		return r
	}
	f := &fakeRows{}
	f.add(a64Start, a64Main, outermost)
	for _, fn := range []uint64{a64Main, a64Foo, a64Bar} {
		if fn == a64Bar && !barFramed {
			f.add(a64Bar, a64End, m(arm64Leaf))
			continue
		}
		f.add(fn, fn+4, m(arm64Leaf))
		f.add(fn+4, fn+8, m(arm64Record))
		f.add(fn+8, fn+0x100, m(arm64Framed))
	}
	return f
}

// arm64Program builds _start -> main -> foo -> bar stopped at bar+8,
// bar a leaf or (barFramed) past its frame record; pac signs every saved
// and live return address.
func arm64Program(barFramed, pac bool) (*fakeStack, regs.Set, []wantFrame) {
	sign := func(v uint64) uint64 {
		if pac {
			return v | pacBits
		}
		return v
	}
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	s.sp -= 64
	var fp, lr uint64
	prologue := func() {
		s.sp -= 16
		s.put(s.sp, fp)
		s.put(s.sp+8, sign(lr))
		fp = s.sp
	}
	spStart := s.sp
	lr = a64Start + 0x20 // bl main
	prologue()
	spMain := s.sp
	lr = a64Main + 0x30 // bl foo
	prologue()
	spFoo := s.sp
	lr = a64Foo + 0x40 // bl bar
	if barFramed {
		prologue()
	}
	r := regs.Set{Arch: regs.ARM64, PC: a64Bar + 8}
	r.Put(regs.ARM64SP, s.sp)
	r.Put(regs.ARM64FP, fp)
	r.Put(regs.ARM64LR, sign(lr))
	return s, r, []wantFrame{
		{a64Bar + 8, s.sp, MethodRegs},
		{a64Foo + 0x40, spFoo, MethodSFrame},
		{a64Main + 0x30, spMain, MethodSFrame},
		{a64Start + 0x20, spStart, MethodSFrame},
	}
}

func a64Module(rows RowFinder) Module {
	return Module{Start: a64Start, End: a64End, Rows: rows, Path: "/bin/prog"}
}

func TestARM64SFrame(t *testing.T) {
	for _, framed := range []bool{false, true} {
		for _, pac := range []bool{false, true} {
			t.Run(fmt.Sprintf("framed=%v,pac=%v", framed, pac), func(t *testing.T) {
				s, r, want := arm64Program(framed, pac)
				st := Walk(r, s.window(), NewModuleList(a64Module(arm64Rows(framed, pac))),
					Options{Stack: s.bounds(), NoFramePointer: true, PACMask: pacMask})
				checkFrames(t, st, want)
				checkStop(t, st, nil, 0)
			})
		}
	}
}

// Without the PAC mask a signed return address is outside every module.
func TestARM64PACWithoutMask(t *testing.T) {
	s, r, want := arm64Program(false, true)
	st := Walk(r, s.window(), NewModuleList(a64Module(arm64Rows(false, true))), Options{NoFramePointer: true})
	checkFrames(t, st, want[:1])
	checkStop(t, st, ErrNoModule, 1)
	if se := (*StepError)(nil); errors.As(st.Err, &se) && se.PC != want[1].pc|pacBits {
		t.Errorf("StepError.PC = %#x, want the signed RA %#x", se.PC, want[1].pc|pacBits)
	}
}

func TestARM64FramePointer(t *testing.T) {
	s, r, want := arm64Program(true, true)
	for i := 1; i < len(want); i++ {
		want[i].method = MethodFP
	}
	st := Walk(r, s.window(), NewModuleList(a64Module(nil)), Options{Stack: s.bounds(), PACMask: pacMask})
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
}

// "RA still in x30" describes only the topmost frame: in a caller, x30
// has long been reused.
func TestRASameOutsideTopmostFrame(t *testing.T) {
	s, r, want := arm64Program(true, false)
	rows := &fakeRows{}
	rows.add(a64Foo, a64Bar, arm64Leaf) // wrong for foo, which called bar
	rows.add(a64Bar, a64Bar+8, arm64Record)
	rows.add(a64Bar+8, a64End, arm64Framed)
	st := Walk(r, s.window(), NewModuleList(a64Module(rows)), Options{NoFramePointer: true})
	checkFrames(t, st, want[:2])
	checkStop(t, st, ErrRANotSaved, 1)
}
