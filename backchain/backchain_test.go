package backchain

import (
	"encoding/binary"
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// stack is a fake big-endian s390x stack at [low, low+len(mem)).
type stack struct {
	low uint64
	mem []byte
}

func newStack(low uint64, size int) *stack { return &stack{low: low, mem: make([]byte, size)} }

func (s *stack) put(addr, v uint64) { binary.BigEndian.PutUint64(s.mem[addr-s.low:], v) }

func (s *stack) window() *unwind.StackWindow {
	return &unwind.StackWindow{Base: s.low, Bytes: s.mem}
}

const (
	low    = 0x3fff0000
	textLo = 0x1000000
	textHi = 0x1100000
	vdsoLo = 0x3ffff000
)

func isCode(pc uint64) bool { return pc >= textLo && pc < textHi || pc >= vdsoLo && pc < vdsoLo+0x1000 }
func inVDSO(pc uint64) bool { return pc >= vdsoLo && pc < vdsoLo+0x1000 }

func s390xRegs(pc, sp, r14 uint64) regs.Set {
	r := regs.Set{Arch: regs.S390X, PC: pc}
	r.Put(regs.S390XSP, sp)
	r.Put(regs.S390XRA, r14)
	r.Put(regs.S390XFP, 0xdead)
	return r
}

// chain builds frames main <- a <- b, each 160+extra bytes, as -mbackchain
// code leaves them: every function stores r14 into its caller's save area
// and its caller's SP as its own back chain. It returns b's SP.
func chain(s *stack) (spB uint64) {
	spMain := uint64(low + 0x800)
	s.put(spMain, 0) // main's back chain: outermost
	spA := spMain - 200
	s.put(spA, spMain)
	s.put(spMain+OffR14, textLo+0x100) // a's return address, in main
	spB = spA - 176
	s.put(spB, spA)
	s.put(spA+OffR14, textLo+0x200) // b's return address, in a
	return spB
}

func TestWalkChain(t *testing.T) {
	s := newStack(low, 0x1000)
	spB := chain(s)
	r := s390xRegs(textLo+0x300, spB, textLo+0x310 /* a stale return into b */)
	st := unwind.Walk(r, s.window(), unwind.NewModuleList(unwind.Module{Start: textLo, End: textHi, Path: "exe"}),
		unwind.Options{Fallback: Unwinder{IsCode: isCode}, Stack: unwind.StackBounds{Low: low, High: low + 0x1000}})
	want := []uint64{textLo + 0x300, textLo + 0x200, textLo + 0x100}
	if !st.Complete || len(st.Frames) != len(want) {
		t.Fatalf("complete=%v err=%v frames=%+v", st.Complete, st.Err, st.Frames)
	}
	for i, f := range st.Frames {
		if f.PC != want[i] {
			t.Errorf("frame %d pc %#x, want %#x", i, f.PC, want[i])
		}
		wantM := unwind.MethodBackChain
		if i == 0 {
			wantM = unwind.MethodRegs
		}
		if f.Method != wantM {
			t.Errorf("frame %d method %v, want %v", i, f.Method, wantM)
		}
	}
	if st.Frames[1].SP != spB+176 || st.Frames[2].SP != spB+176+200 {
		t.Errorf("caller SPs %#x %#x", st.Frames[1].SP, st.Frames[2].SP)
	}
}

func TestStepFields(t *testing.T) {
	s := newStack(low, 0x1000)
	spB := chain(s)
	cur := s390xRegs(textLo+0x300, spB, 0)
	next, err := Unwinder{}.Step(&cur, false, s.window(), binary.BigEndian)
	if err != nil {
		t.Fatal(err)
	}
	if next.Arch != regs.S390X || next.PC != textLo+0x200 || next.SP() != spB+176 {
		t.Fatalf("next = %+v", next)
	}
	if _, ok := next.Get(regs.S390XFP); ok {
		t.Error("r11 cannot be recovered from the back chain but is valid")
	}
	if _, ok := next.Get(regs.S390XRA); ok {
		t.Error("r14 of the caller is unknown but valid")
	}
}

// A topmost leaf without a frame: SP is still the caller's frame and its
// back chain word is the caller's; the live r14 is the return address when
// the saved slot holds nothing plausible.
func TestTopmostLiveR14(t *testing.T) {
	s := newStack(low, 0x1000)
	sp := uint64(low + 0x800)
	s.put(sp, 0) // the caller is the outermost function
	r := s390xRegs(textLo+0x400, sp, textLo+0x120)
	next, err := Unwinder{IsCode: isCode}.Step(&r, true, s.window(), binary.BigEndian)
	if err != nil {
		t.Fatal(err)
	}
	if next.PC != textLo+0x120 || next.SP() != sp {
		t.Fatalf("next = pc %#x sp %#x", next.PC, next.SP())
	}
	// Not topmost: a zero back chain is the end.
	if _, err := (Unwinder{}).Step(&r, false, s.window(), binary.BigEndian); !errors.Is(err, unwind.ErrOutermost) {
		t.Fatalf("err = %v, want ErrOutermost", err)
	}

	// Saved slot garbage (odd), back chain non-zero: r14 in the topmost
	// frame, an error below it.
	sp2 := sp - 160
	s.put(sp2, sp)
	s.put(sp+OffR14, 0x12345)
	r2 := s390xRegs(textLo+0x500, sp2, textLo+0x130)
	next, err = Unwinder{IsCode: isCode}.Step(&r2, true, s.window(), binary.BigEndian)
	// A leaf with a frame: the caller's SP is the back chain.
	if err != nil || next.PC != textLo+0x130 || next.SP() != sp {
		t.Fatalf("topmost: next pc %#x sp %#x err %v", next.PC, next.SP(), err)
	}
	if _, err := (Unwinder{IsCode: isCode}).Step(&r2, false, s.window(), binary.BigEndian); !errors.Is(err, unwind.ErrBadRA) {
		t.Fatalf("not topmost: err = %v, want ErrBadRA", err)
	}
}

func TestVDSOWrapper(t *testing.T) {
	s := newStack(low, 0x1000)
	spCaller := uint64(low + 0x900)
	s.put(spCaller, 0)
	sp := spCaller - VDSOFrameSize
	s.put(sp, 0) // the wrapper stores a zero back chain
	s.put(sp+VDSOReturnOffset, textLo+0x640)
	r := s390xRegs(vdsoLo+0x20, sp, vdsoLo+0x18)
	u := Unwinder{InVDSO: inVDSO, IsCode: isCode}
	next, err := u.Step(&r, false, s.window(), binary.BigEndian)
	if err != nil || next.PC != textLo+0x640 || next.SP() != spCaller {
		t.Fatalf("next pc %#x sp %#x err %v", next.PC, next.SP(), err)
	}
	// Outside the vDSO the same stack is the outermost frame.
	r.PC = textLo + 0x20
	if _, err := u.Step(&r, false, s.window(), binary.BigEndian); !errors.Is(err, unwind.ErrOutermost) {
		t.Fatalf("err = %v, want ErrOutermost", err)
	}
}

func TestStepErrors(t *testing.T) {
	s := newStack(low, 0x1000)
	spB := chain(s)
	w := s.window()
	for name, tc := range map[string]struct {
		r    regs.Set
		mem  unwind.Memory
		want error
	}{
		"arch":       {regs.Set{Arch: regs.ARM64}, w, unwind.ErrArch},
		"no sp":      {regs.Set{Arch: regs.S390X}, w, unwind.ErrRegUnknown},
		"odd sp":     {s390xRegs(textLo, spB+4, 0), w, unwind.ErrMisaligned},
		"unreadable": {s390xRegs(textLo, 0x10, 0), w, unwind.ErrMemory},
		"nil memory": {s390xRegs(textLo, spB, 0), nil, unwind.ErrMemory},
		"huge sp":    {s390xRegs(textLo, 1<<63+8, 0), w, unwind.ErrMemory},
	} {
		_, err := Unwinder{}.Step(&tc.r, false, tc.mem, binary.BigEndian)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
		var se *unwind.StepError
		if !errors.As(err, &se) {
			t.Errorf("%s: %T is not *unwind.StepError", name, err)
		}
	}
	// A misaligned back chain.
	s.put(spB, spB+0x43)
	cur := s390xRegs(textLo, spB, 0)
	if _, err := (Unwinder{}).Step(&cur, false, w, binary.BigEndian); !errors.Is(err, unwind.ErrMisaligned) {
		t.Errorf("misaligned back chain: err = %v", err)
	}
	// A back chain pointing out of the window: the saved r14 read fails.
	s.put(spB, 0x7fff0000)
	if _, err := (Unwinder{}).Step(&cur, false, w, binary.BigEndian); !errors.Is(err, unwind.ErrMemory) {
		t.Errorf("back chain outside memory: err = %v", err)
	}
}

// A failed back-chain step ends the walk in unwind's vocabulary: the same
// sentinel and *unwind.StepError an SFrame or frame-pointer step gives,
// with the walker's frame index, the method and what was read.
func TestWalkStopsInUnwindVocabulary(t *testing.T) {
	s := newStack(low, 0x1000)
	spB := chain(s)
	spA := spB + 176
	s.put(spA, 0x7fff0000) // a's back chain leads out of the stack
	r := s390xRegs(textLo+0x300, spB, 0)
	st := unwind.Walk(r, s.window(), unwind.NewModuleList(unwind.Module{Start: textLo, End: textHi, Path: "exe"}),
		unwind.Options{Fallback: Unwinder{IsCode: isCode}})
	var se *unwind.StepError
	if st.Complete || !errors.Is(st.Err, unwind.ErrMemory) || !errors.As(st.Err, &se) {
		t.Fatalf("complete=%v err=%v, want a *unwind.StepError wrapping unwind.ErrMemory", st.Complete, st.Err)
	}
	if se.Frame != 1 || se.PC != textLo+0x200 || se.Method != unwind.MethodBackChain || se.Addr != 0x7fff0000+OffR14 || se.What != "saved r14" {
		t.Errorf("StepError = %+v, want frame 1 at a's PC, backchain, saved r14 at %#x", se, 0x7fff0000+OffR14)
	}
}

// A back chain loop (a frame pointing at itself or below) is stopped by
// the walker's SP guard, not followed forever.
func TestLoopStops(t *testing.T) {
	s := newStack(low, 0x1000)
	sp := uint64(low + 0x400)
	s.put(sp, sp) // points at itself
	s.put(sp+OffR14, textLo+0x10)
	r := s390xRegs(textLo+0x20, sp, 0)
	st := unwind.Walk(r, s.window(), unwind.NewModuleList(unwind.Module{Start: textLo, End: textHi}),
		unwind.Options{Fallback: Unwinder{}})
	if st.Complete || !errors.Is(st.Err, unwind.ErrSPNotIncreasing) {
		t.Fatalf("complete=%v err=%v frames=%d", st.Complete, st.Err, len(st.Frames))
	}
}

// FuzzStep: any stack contents and registers give a caller or an error,
// never a panic, and a caller always has a valid SP.
func FuzzStep(f *testing.F) {
	fuzzbudget.Limit(f)
	s := newStack(low, 0x400)
	f.Add(s.mem, uint64(low+0x100), uint64(textLo), uint64(textLo+2), true)
	f.Fuzz(func(t *testing.T, mem []byte, sp, pc, r14 uint64, topmost bool) {
		w := &unwind.StackWindow{Base: low, Bytes: mem}
		r := s390xRegs(pc, sp, r14)
		n, err := Unwinder{InVDSO: inVDSO}.Step(&r, topmost, w, binary.BigEndian)
		if err != nil {
			return
		}
		if _, ok := n.Get(regs.S390XSP); !ok || n.Arch != regs.S390X || n.PC%2 != 0 || n.PC == 0 {
			t.Fatalf("bad caller %+v", n)
		}
	})
}

// BenchmarkWalk: a three-frame back-chain walk over a captured window.
func BenchmarkWalk(b *testing.B) {
	s := newStack(low, 0x1000)
	spB := chain(s)
	r := s390xRegs(textLo+0x300, spB, textLo+0x310)
	mods := unwind.NewModuleList(unwind.Module{Start: textLo, End: textHi})
	opts := unwind.Options{Fallback: Unwinder{IsCode: isCode}}
	w := s.window()
	var walker unwind.Walker
	b.ReportAllocs()
	for b.Loop() {
		if st := walker.Walk(r, w, mods, opts); len(st.Frames) != 3 {
			b.Fatal(st.Err)
		}
	}
}
