package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// fakeStack builds a synthetic stack the way the target's code would:
// pushes move SP down, frames are written where the ABI puts them.
type fakeStack struct {
	low   uint64
	mem   []byte
	sp    uint64
	order binary.ByteOrder
}

func newFakeStack(low, size uint64, order binary.ByteOrder) *fakeStack {
	return &fakeStack{low: low, mem: make([]byte, size), sp: low + size, order: order}
}

func (s *fakeStack) high() uint64 { return s.low + uint64(len(s.mem)) }

func (s *fakeStack) put(addr, v uint64) {
	if addr < s.low || addr+8 > s.high() {
		panic(fmt.Sprintf("fake stack: put %#x outside [%#x, %#x)", addr, s.low, s.high()))
	}
	s.order.PutUint64(s.mem[addr-s.low:], v)
}

func (s *fakeStack) push(v uint64) {
	s.sp -= 8
	s.put(s.sp, v)
}

func (s *fakeStack) window() *StackWindow { return &StackWindow{Base: s.low, Bytes: s.mem} }

func (s *fakeStack) bounds() StackBounds { return StackBounds{Low: s.low, High: s.high()} }

// fakeRows is a RowFinder over address ranges, in ELF vaddr space.
type fakeRows struct {
	ranges  []rowRange
	lookups []uint64 // every pc looked up, to check PC-1 and the bias
	err     error    // returned instead of ErrNoFunc for uncovered pcs when set
}

type rowRange struct {
	lo, hi uint64
	row    sframe.Row
}

func (f *fakeRows) add(lo, hi uint64, row sframe.Row) {
	f.ranges = append(f.ranges, rowRange{lo, hi, row})
}

func (f *fakeRows) Lookup(pc uint64) (sframe.Row, error) {
	f.lookups = append(f.lookups, pc)
	for _, r := range f.ranges {
		if r.lo <= pc && pc < r.hi {
			return r.row, nil
		}
	}
	if f.err != nil {
		return sframe.Row{}, f.err
	}
	return sframe.Row{}, fmt.Errorf("pc %#x: %w", pc, sframe.ErrNoFunc)
}

// Rule constructors, named after readelf's notation.
func cfaReg(reg int, off int64) sframe.Rule {
	return sframe.Rule{Kind: sframe.RuleReg, Reg: uint16(reg), Offset: off}
}
func atCFA(off int64) sframe.Rule { return sframe.Rule{Kind: sframe.RuleCFA, Offset: off, Deref: true} }

var (
	same    = sframe.Rule{Kind: sframe.RuleSame}
	fixedRA = sframe.Rule{Kind: sframe.RuleCFA, Offset: -8, Deref: true, Fixed: true}
)

// amd64 rows of a standard -fno-omit-frame-pointer prologue.
var (
	amd64Entry  = sframe.Row{CFA: cfaReg(regs.AMD64RSP, 8), RA: fixedRA, FP: same}         // sp+8 u f
	amd64Pushed = sframe.Row{CFA: cfaReg(regs.AMD64RSP, 16), RA: fixedRA, FP: atCFA(-16)}  // sp+16 c-16 f
	amd64Framed = sframe.Row{CFA: cfaReg(regs.AMD64RBP, 16), RA: fixedRA, FP: atCFA(-16)}  // fp+16 c-16 f
	outermost   = sframe.Row{Outermost: true}                                              // RA undefined
	amd64Leave  = sframe.Row{CFA: cfaReg(regs.AMD64RSP, 8), RA: fixedRA, FP: atCFA(-16)}   // sp+8 c-16 f
	arm64Leaf   = sframe.Row{CFA: cfaReg(regs.ARM64SP, 0), RA: same, FP: same}             // sp+0 u u
	arm64Record = sframe.Row{CFA: cfaReg(regs.ARM64SP, 16), RA: atCFA(-8), FP: atCFA(-16)} // sp+16 c-16 c-8
	arm64Framed = sframe.Row{CFA: cfaReg(regs.ARM64FP, 16), RA: atCFA(-8), FP: atCFA(-16)} // fp+16 c-16 c-8
)

// amd64Prologue adds the three rows of push %rbp (1 byte); mov %rsp,%rbp
// (3 bytes) for the function [lo, hi).
func amd64Prologue(f *fakeRows, lo, hi uint64) {
	f.add(lo, lo+1, amd64Entry)
	f.add(lo+1, lo+4, amd64Pushed)
	f.add(lo+4, hi, amd64Framed)
}

func amd64Regs(pc, sp, fp uint64) regs.Set {
	r := regs.Set{Arch: regs.AMD64, PC: pc}
	r.Put(regs.AMD64RSP, sp)
	r.Put(regs.AMD64RBP, fp)
	return r
}

type wantFrame struct {
	pc, sp uint64
	method Method
}

// checkFrames compares a walk's frames with the expected ones (an sp of
// 0 is not checked) and the frame 0 invariants.
func checkFrames(t *testing.T, st Stack, want []wantFrame) {
	t.Helper()
	if len(st.Frames) != len(want) {
		t.Errorf("got %d frames, want %d", len(st.Frames), len(want))
	}
	for i := 0; i < len(st.Frames) && i < len(want); i++ {
		f, w := st.Frames[i], want[i]
		if f.PC != w.pc || f.Method != w.method || (w.sp != 0 && f.SP != w.sp) {
			t.Errorf("frame %d = {pc %#x sp %#x %v}, want {pc %#x sp %#x %v}", i, f.PC, f.SP, f.Method, w.pc, w.sp, w.method)
		}
		if f.Exact != (i == 0) {
			t.Errorf("frame %d: Exact = %v", i, f.Exact)
		}
	}
	if t.Failed() {
		for i, f := range st.Frames {
			t.Logf("  #%d pc %#x sp %#x %v", i, f.PC, f.SP, f.Method)
		}
		t.Logf("  complete %v err %v", st.Complete, st.Err)
	}
}

// checkStop checks how a walk ended: complete, or stopped by want at
// frame index wantFrame.
func checkStop(t *testing.T, st Stack, want error, wantFrame int) {
	t.Helper()
	if want == nil {
		if !st.Complete || st.Err != nil {
			t.Errorf("walk not complete: complete %v, err %v", st.Complete, st.Err)
		}
		return
	}
	if st.Complete {
		t.Errorf("walk complete, want stop with %v", want)
	}
	if !errors.Is(st.Err, want) {
		t.Errorf("err = %v, want %v", st.Err, want)
		return
	}
	var se *StepError
	if !errors.As(st.Err, &se) {
		t.Errorf("err %T is not a *StepError", st.Err)
		return
	}
	if se.Frame != wantFrame {
		t.Errorf("err at frame %d, want %d (%v)", se.Frame, wantFrame, st.Err)
	}
}

// readWord reads the 8-byte word at addr in the given byte order, as a
// Stepper does (package backchain has its own, allocation-free, reader).
func readWord(mem Memory, addr uint64, order binary.ByteOrder) (uint64, error) {
	var b [8]byte
	if addr > math.MaxInt64-8 {
		return 0, ErrOutsideWindow
	}
	n, err := mem.ReadAt(b[:], int64(addr))
	if n == len(b) {
		return order.Uint64(b[:]), nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return 0, err
}
