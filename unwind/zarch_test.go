package unwind

import (
	"encoding/binary"
	"fmt"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// (File named zarch, not s390x: a _s390x suffix would be a build constraint.)

const (
	s390Start = 0x1000000
	s390Main  = 0x1000100
	s390Foo   = 0x1000200
	s390Bar   = 0x1000300
	s390End   = 0x1000400
)

// s390x prologue: stmg %r6,%r15,48(%r15) at +0 (6 bytes), then
// aghi %r15,-160 at +6 (4 bytes). The rows are as readelf prints them,
// with the CFA offset already decoded (stored (160-160)/8 = 0 is sp+160).
var (
	s390Entry = sframe.Row{CFA: cfaReg(regs.S390XSP, 160), RA: same, FP: same}             // sp+160 u u
	s390Saved = sframe.Row{CFA: cfaReg(regs.S390XSP, 160), RA: atCFA(-48), FP: atCFA(-72)} // sp+160 c-72 c-48
	s390Frame = sframe.Row{CFA: cfaReg(regs.S390XSP, 320), RA: atCFA(-48), FP: atCFA(-72)} // sp+320 c-72 c-48
)

func s390Rows() *fakeRows {
	f := &fakeRows{}
	f.add(s390Start, s390Main, outermost)
	for _, fn := range []uint64{s390Main, s390Foo, s390Bar} {
		f.add(fn, fn+6, s390Entry)
		f.add(fn+6, fn+10, s390Saved)
		f.add(fn+10, fn+0x100, s390Frame)
	}
	return f
}

// s390Program builds _start -> main -> foo -> bar (big-endian, with
// -mbackchain) and stops in bar at barOff: 0 entry, 6 after stmg, 10
// after aghi and the back chain store.
func s390Program(barOff uint64) (*fakeStack, regs.Set, []wantFrame) {
	s := newFakeStack(stackLow, 0x1000, binary.BigEndian)
	s.sp -= 64
	r15 := s.sp - 160 // _start's frame; back chain 0
	r11, r14 := uint64(0xf00d), uint64(0)
	s.put(r15, 0)
	saveRegs := func() { // stmg %r6,%r15,48(%r15): r11@88, r14@112, r15@120
		s.put(r15+88, r11)
		s.put(r15+112, r14)
		s.put(r15+120, r15)
	}
	allocFrame := func() { // aghi %r15,-160; stg %r1,0(%r15)
		old := r15
		r15 -= 160
		s.put(r15, old)
	}
	spStart := r15
	r14 = s390Start + 0x20 // brasl %r14,main
	saveRegs()
	allocFrame()
	r11 = r15 + 8
	spMain := r15
	r14 = s390Main + 0x30 // brasl %r14,foo
	saveRegs()
	allocFrame()
	r11 = r15 + 16
	spFoo := r15
	r14 = s390Foo + 0x40 // brasl %r14,bar
	if barOff >= 6 {
		saveRegs()
	}
	if barOff >= 10 {
		allocFrame()
	}
	r := regs.Set{Arch: regs.S390X, PC: s390Bar + barOff}
	r.Put(regs.S390XSP, r15)
	r.Put(regs.S390XFP, r11)
	r.Put(regs.S390XRA, r14)
	return s, r, []wantFrame{
		{s390Bar + barOff, r15, MethodRegs},
		{s390Foo + 0x40, spFoo, MethodSFrame},
		{s390Main + 0x30, spMain, MethodSFrame},
		{s390Start + 0x20, spStart, MethodSFrame},
	}
}

func s390Module(rows RowFinder) Module {
	return Module{Start: s390Start, End: s390End, Rows: rows, Path: "/bin/prog"}
}

func TestS390XSFrame(t *testing.T) {
	for _, off := range []uint64{0, 6, 10} {
		t.Run(fmt.Sprintf("bar+%d", off), func(t *testing.T) {
			s, r, want := s390Program(off)
			st := Walk(r, s.window(), NewModuleList(s390Module(s390Rows())), Options{Stack: s.bounds()})
			checkFrames(t, st, want)
			checkStop(t, st, nil, 0)
		})
	}
}

// The same stack read little-endian is garbage: the byte order comes from
// the arch, and a wrong one must not go unnoticed.
func TestS390XByteOrderMatters(t *testing.T) {
	s, r, _ := s390Program(10)
	st := Walk(r, s.window(), NewModuleList(s390Module(s390Rows())), Options{ByteOrder: binary.LittleEndian})
	if st.Complete {
		t.Fatalf("walk with the wrong byte order completed: %+v", st.Frames)
	}
}

// s390x has no frame-pointer convention: without SFrame the walk stops,
// unless a Stepper (the back chain) is plugged in.
func TestS390XFallback(t *testing.T) {
	s, r, want := s390Program(10)
	st := Walk(r, s.window(), NewModuleList(s390Module(nil)), Options{})
	checkFrames(t, st, want[:1])
	checkStop(t, st, ErrNoUnwindInfo, 0)

	bc := &backChain{}
	st = Walk(r, s.window(), NewModuleList(s390Module(nil)), Options{Stack: s.bounds(), Fallback: bc})
	for i := 1; i < len(want); i++ {
		want[i].method = MethodBackChain
	}
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
	if bc.calls != 4 {
		t.Errorf("back chain called %d times, want 4", bc.calls)
	}

	// SFrame first, the Stepper only where there is no row.
	rows := s390Rows()
	rows.ranges = rows.ranges[:1] // only _start has rows
	st = Walk(r, s.window(), NewModuleList(s390Module(rows)), Options{Stack: s.bounds(), Fallback: bc})
	want[3].method = MethodBackChain
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
}

// backChain is a minimal s390x back-chain Stepper (the real one belongs to
// package backchain): [SP] is the caller's SP, r14 was saved at +112 of
// the caller's frame.
type backChain struct{ calls int }

func (*backChain) Method() Method { return MethodBackChain }

func (b *backChain) Step(cur *regs.Set, topmost bool, mem Memory, order binary.ByteOrder) (regs.Set, error) {
	b.calls++
	bc, err := readWord(mem, cur.SP(), order)
	if err != nil {
		return regs.Set{}, err
	}
	if bc == 0 {
		return regs.Set{}, ErrOutermost
	}
	ra, err := readWord(mem, bc+112, order)
	if err != nil {
		return regs.Set{}, err
	}
	next := regs.Set{Arch: regs.S390X, PC: ra}
	next.Put(regs.S390XSP, bc)
	return next, nil
}
