package unwind

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

func fpOnly() Modules { return NewModuleList(exeModule(nil)) }

func TestFrame0OutsideModules(t *testing.T) {
	s, r, _ := amd64Program(8)
	r.PC = 0xdead0000
	st := Walk(r, s.window(), fpOnly(), Options{})
	checkFrames(t, st, []wantFrame{{0xdead0000, r.SP(), MethodRegs}})
	checkStop(t, st, ErrNoModule, 0)
}

func TestRAOutsideModules(t *testing.T) {
	s, r, want := amd64Program(8)
	s.put(r.FP()+8, 0xdead0000) // bar's saved RA
	st := Walk(r, s.window(), fpOnly(), Options{})
	checkFrames(t, st, want[:1])
	checkStop(t, st, ErrNoModule, 1)
}

func TestReturnAddressZeroIsOutermost(t *testing.T) {
	s, r, want := amd64Program(8)
	s.put(want[1].sp+16+8, 0) // foo's frame record (above its 16-byte locals): RA 0, saved rbp non-zero
	st := Walk(r, s.window(), fpOnly(), Options{})
	want[1].method = MethodFP
	checkFrames(t, st, want[:2])
	checkStop(t, st, nil, 0)
}

// A frame pointer that points at itself would loop forever.
func TestSelfReferencingFPChain(t *testing.T) {
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	x := uint64(stackLow + 0x800)
	s.put(x, x)
	s.put(x+8, rt(mainFn+0x30))
	r := amd64Regs(rt(barFn+8), x-8, x)
	st := Walk(r, s.window(), fpOnly(), Options{})
	checkFrames(t, st, []wantFrame{{rt(barFn + 8), x - 8, MethodRegs}, {rt(mainFn + 0x30), x + 16, MethodFP}})
	checkStop(t, st, ErrBadFP, 1)

	// A two-link cycle is caught the same way.
	y := x + 0x40
	s.put(x, y)
	s.put(y, x)
	s.put(y+8, rt(fooFn+0x40))
	st = Walk(r, s.window(), fpOnly(), Options{})
	if len(st.Frames) != 3 || !errors.Is(st.Err, ErrBadFP) {
		t.Errorf("two-link cycle: %d frames, err %v", len(st.Frames), st.Err)
	}
}

// A row whose CFA is SP+0 repeats the SP: allowed for the topmost frame
// (a function at entry), a loop in any caller.
func TestSPNotIncreasing(t *testing.T) {
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	sp := uint64(stackLow + 0x800)
	s.put(sp-8, rt(fooFn+5)) // "RA" at CFA-8, pointing back into foo
	rows := &fakeRows{}
	rows.add(fooFn, barFn, sframe.Row{CFA: cfaReg(regs.AMD64RSP, 0), RA: fixedRA, FP: same})
	r := amd64Regs(rt(fooFn+2), sp, 0)
	st := Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{})
	checkFrames(t, st, []wantFrame{{rt(fooFn + 2), sp, MethodRegs}, {rt(fooFn + 5), sp, MethodSFrame}})
	checkStop(t, st, ErrSPNotIncreasing, 1)
}

func TestMaxDepth(t *testing.T) {
	s, r, want := recursiveStack(40)
	st := Walk(r, s.window(), fpOnly(), Options{MaxDepth: 10})
	checkFrames(t, st, want[:10])
	checkStop(t, st, ErrMaxDepth, 10)

	s, r, want = recursiveStack(DefaultMaxDepth + 10)
	st = Walk(r, s.window(), fpOnly(), Options{})
	checkFrames(t, st, want[:DefaultMaxDepth])
	checkStop(t, st, ErrMaxDepth, DefaultMaxDepth)

	s, r, want = recursiveStack(40)
	st = Walk(r, s.window(), fpOnly(), Options{})
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
}

// recursiveStack builds n frame-pointer frames: main calling foo calling
// foo ... (the deepest at foo+8), with main's saved rbp 0.
func recursiveStack(n int) (*fakeStack, regs.Set, []wantFrame) {
	s := newFakeStack(stackLow, uint64(n+4)*32, binary.LittleEndian)
	s.sp -= 16
	rbp := uint64(0)
	want := make([]wantFrame, n)
	// Build from the outermost frame inwards, filling want backwards.
	s.push(rbp) // main's frame record: saved rbp 0
	rbp = s.sp
	s.sp -= 16
	want[n-1] = wantFrame{rt(mainFn + 0x30), s.sp, MethodFP}
	for i := n - 2; i >= 0; i-- {
		ra := rt(mainFn + 0x30)
		if i < n-2 {
			ra = rt(fooFn + 0x40)
		}
		want[i+1].pc = ra
		s.push(ra)
		s.push(rbp)
		rbp = s.sp
		s.sp -= 16
		want[i] = wantFrame{0, s.sp, MethodFP}
	}
	want[0].pc, want[0].method = rt(fooFn+8), MethodRegs
	return s, amd64Regs(rt(fooFn+8), s.sp, rbp), want
}

func TestStackBounds(t *testing.T) {
	s, r, want := amd64Program(8)
	rows := amd64Rows()
	// A thread stack that ends just above foo's frame: main's SP is outside.
	b := StackBounds{Low: s.low, High: want[1].sp + 8}
	st := Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{Stack: b})
	checkFrames(t, st, want[:2])
	checkStop(t, st, ErrOutsideStack, 1)

	// Misaligned SP: the CFA offset off by 4.
	rows = amd64Rows()
	rows.ranges = append([]rowRange{{barFn, textEnd, sframe.Row{CFA: cfaReg(regs.AMD64RSP, 60), RA: fixedRA, FP: same}}}, rows.ranges...)
	st = Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{})
	checkStop(t, st, ErrMisaligned, 0)
}

// An FP-based CFA needs FP >= SP (the kernel's check): a garbage rbp
// below the stack pointer stops the walk.
func TestFPBasedCFABelowSP(t *testing.T) {
	s, r, _ := amd64Program(8)
	r.Put(regs.AMD64RBP, r.SP()-64)
	st := Walk(r, s.window(), NewModuleList(exeModule(amd64Rows())), Options{})
	checkStop(t, st, ErrBadFP, 0)
	if se := (*StepError)(nil); !errors.As(st.Err, &se) || se.Addr != r.SP()-64 || se.Method != MethodSFrame {
		t.Errorf("StepError = %+v, want Addr = the bad rbp, method sframe", se)
	}
}

func TestNoUnwindInfo(t *testing.T) {
	s, r, _ := amd64Program(8)
	st := Walk(r, s.window(), fpOnly(), Options{NoFramePointer: true})
	checkStop(t, st, ErrNoUnwindInfo, 0)
}

func TestSignalRowStops(t *testing.T) {
	s, r, _ := amd64Program(8)
	rows := amd64Rows()
	rows.ranges = append([]rowRange{{barFn, textEnd, sframe.Row{Signal: true, CFA: cfaReg(regs.AMD64RSP, 8), RA: fixedRA}}}, rows.ranges...)
	st := Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{})
	checkStop(t, st, ErrSignalFrame, 0)
}

func TestUnknownArch(t *testing.T) {
	st := Walk(regs.Set{PC: 0x1000}, nil, fpOnly(), Options{})
	checkStop(t, st, ErrArch, 0)
	if len(st.Frames) != 1 {
		t.Errorf("%d frames, want frame 0 only", len(st.Frames))
	}
}

// A captured window without live memory behind it: the first read above
// the window fails with the address in the error.
func TestMemoryOutsideWindow(t *testing.T) {
	s, r, want := amd64Program(8)
	w := s.window()
	cut := want[2].sp - s.low // the window ends at main's SP: main's own frame record is not in it
	w.Bytes = w.Bytes[:cut]
	st := Walk(r, w, NewModuleList(exeModule(amd64Rows())), Options{})
	checkFrames(t, st, want[:3])
	checkStop(t, st, ErrMemory, 2)
	if se := (*StepError)(nil); !errors.As(st.Err, &se) || se.Addr < want[2].sp || !errors.Is(st.Err, ErrOutsideWindow) {
		t.Errorf("StepError = %+v, want a read above %#x wrapping ErrOutsideWindow", se, want[2].sp)
	}

	// With the live process as Fallback the same walk completes.
	w.Fallback = &StackWindow{Base: s.low, Bytes: s.mem}
	st = Walk(r, w, NewModuleList(exeModule(amd64Rows())), Options{})
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
}

// One Walker, different stacks: nothing leaks from one walk to the next.
func TestWalkerReuse(t *testing.T) {
	var w Walker
	s1, r1, want1 := amd64Program(8)
	s2, r2, want2 := arm64Program(true, false)
	for i := 0; i < 3; i++ {
		st := w.Walk(r1, s1.window(), NewModuleList(exeModule(amd64Rows())), Options{Stack: s1.bounds()})
		checkFrames(t, st, want1)
		checkStop(t, st, nil, 0)
		st = w.Walk(r2, s2.window(), NewModuleList(a64Module(arm64Rows(true, false))), Options{})
		checkFrames(t, st, want2)
		checkStop(t, st, nil, 0)
	}
}

type countingReader struct {
	r     io.ReaderAt
	calls int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.calls++
	return c.r.ReadAt(p, off)
}

func TestStackWindow(t *testing.T) {
	live := make([]byte, 64)
	for i := range live {
		live[i] = byte(i)
	}
	fb := &countingReader{r: &StackWindow{Base: 0x1000, Bytes: live}}
	w := &StackWindow{Base: 0x1010, Bytes: make([]byte, 16), Fallback: fb}
	binary.BigEndian.PutUint64(w.Bytes[8:], 0x0102030405060708)

	// Inside: served from the window, in the byte order asked for.
	if v, err := readWord(w, 0x1018, binary.BigEndian); err != nil || v != 0x0102030405060708 || fb.calls != 0 {
		t.Errorf("inside: %#x %v (fallback calls %d)", v, err, fb.calls)
	}
	if v, _ := readWord(w, 0x1018, binary.LittleEndian); v != 0x0807060504030201 {
		t.Errorf("inside little-endian: %#x", v)
	}
	// Outside and straddling: the whole read goes to the fallback.
	for _, addr := range []uint64{0x1000, 0x101c, 0x1030} {
		p := make([]byte, 8)
		if n, err := w.ReadAt(p, int64(addr)); n != 8 || err != nil || p[0] != byte(addr-0x1000) {
			t.Errorf("%#x: n %d err %v p %v", addr, n, err, p)
		}
	}
	if fb.calls != 3 {
		t.Errorf("fallback calls %d, want 3", fb.calls)
	}
	// No fallback: partial copy and ErrOutsideWindow; negative offsets fail.
	w.Fallback = nil
	p := make([]byte, 8)
	if n, err := w.ReadAt(p, 0x101c); n != 4 || !errors.Is(err, ErrOutsideWindow) {
		t.Errorf("straddling without fallback: n %d err %v", n, err)
	}
	if n, err := w.ReadAt(p, 0x0ff8); n != 0 || !errors.Is(err, ErrOutsideWindow) {
		t.Errorf("below without fallback: n %d err %v", n, err)
	}
	if n, err := w.ReadAt(p, -8); n != 0 || err == nil {
		t.Errorf("negative offset: n %d err %v", n, err)
	}
	if _, err := readWord(w, ^uint64(0)-3, binary.LittleEndian); err == nil {
		t.Errorf("readWord at the top of the address space succeeded")
	}
}

func TestModuleList(t *testing.T) {
	l := NewModuleList(
		Module{Start: 0x3000, End: 0x4000, Path: "c"},
		Module{Start: 0x1000, End: 0x2000, Path: "a"},
		Module{Start: 0x2000, End: 0x2800, Path: "b"},
	)
	for _, c := range []struct {
		pc   uint64
		path string
	}{{0xfff, ""}, {0x1000, "a"}, {0x1fff, "a"}, {0x2000, "b"}, {0x27ff, "b"}, {0x2800, ""}, {0x3abc, "c"}, {0x4000, ""}} {
		m, ok := l.ModuleAt(c.pc)
		got := ""
		if ok {
			got = m.Path
		}
		if got != c.path {
			t.Errorf("ModuleAt(%#x) = %q, want %q", c.pc, got, c.path)
		}
	}
}
