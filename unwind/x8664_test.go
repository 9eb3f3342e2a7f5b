package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// A PIE loaded at amd64Bias; the functions' ELF addresses are below.
const (
	amd64Bias = 0x555555554000
	startFn   = 0x1000 // _start: RA-undefined rows
	mainFn    = 0x1100
	fooFn     = 0x1200
	barFn     = 0x1300
	textEnd   = 0x1400
	stackLow  = 0x7ffff7ff0000
)

func rt(vaddr uint64) uint64 { return vaddr + amd64Bias }

// amd64Rows is the exe's table: _start outermost, the others with the
// standard frame-pointer prologue.
func amd64Rows() *fakeRows {
	f := &fakeRows{}
	f.add(startFn, mainFn, outermost)
	amd64Prologue(f, mainFn, fooFn)
	amd64Prologue(f, fooFn, barFn)
	amd64Prologue(f, barFn, textEnd)
	return f
}

func exeModule(rows RowFinder) Module {
	return Module{Start: rt(startFn), End: rt(textEnd), Bias: amd64Bias, Rows: rows, Path: "/bin/prog"}
}

// amd64Program builds _start -> main -> foo -> bar, with the thread
// stopped in bar at barOff: 0 entry, 1 after push %rbp, 4 after
// mov %rsp,%rbp, 8 after sub $48,%rsp. It returns the registers and the
// frames a correct unwinder finds.
func amd64Program(barOff uint64) (*fakeStack, regs.Set, []wantFrame) {
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	s.sp -= 64 // argv, envp, auxv
	rbp := uint64(0)
	spStart := s.sp
	s.push(rt(startFn + 0x20)) // _start: call main
	s.push(rbp)
	rbp = s.sp
	s.sp -= 32
	spMain := s.sp
	s.push(rt(mainFn + 0x30)) // main: call foo
	s.push(rbp)
	rbp = s.sp
	s.sp -= 16
	spFoo := s.sp
	s.push(rt(fooFn + 0x40)) // foo: call bar
	if barOff >= 1 {
		s.push(rbp)
	}
	if barOff >= 4 {
		rbp = s.sp
	}
	if barOff >= 8 {
		s.sp -= 48
	}
	r := amd64Regs(rt(barFn+barOff), s.sp, rbp)
	return s, r, []wantFrame{
		{rt(barFn + barOff), s.sp, MethodRegs},
		{rt(fooFn + 0x40), spFoo, MethodSFrame},
		{rt(mainFn + 0x30), spMain, MethodSFrame},
		{rt(startFn + 0x20), spStart, MethodSFrame},
	}
}

func TestAMD64SFrame(t *testing.T) {
	for _, off := range []uint64{0, 1, 4, 8} {
		t.Run(fmt.Sprintf("bar+%d", off), func(t *testing.T) {
			s, r, want := amd64Program(off)
			rows := amd64Rows()
			mods := NewModuleList(exeModule(rows))
			st := Walk(r, s.window(), mods, Options{Stack: s.bounds(), NoFramePointer: true})
			checkFrames(t, st, want)
			checkStop(t, st, nil, 0)
			// Frame 0 is looked up at its PC, callers at RA-1, all in ELF
			// addresses (the bias removed).
			wantLookups := []uint64{barFn + off, fooFn + 0x3f, mainFn + 0x2f, startFn + 0x1f}
			if !slices.Equal(rows.lookups, wantLookups) {
				t.Errorf("lookups %#x, want %#x", rows.lookups, wantLookups)
			}
		})
	}
}

func TestAMD64FramePointer(t *testing.T) {
	for _, off := range []uint64{4, 8} {
		t.Run(fmt.Sprintf("bar+%d", off), func(t *testing.T) {
			s, r, want := amd64Program(off)
			for i := 1; i < len(want); i++ {
				want[i].method = MethodFP
			}
			mods := NewModuleList(exeModule(nil))
			st := Walk(r, s.window(), mods, Options{Stack: s.bounds()})
			checkFrames(t, st, want)
			checkStop(t, st, nil, 0) // main's saved rbp is 0
		})
	}
	// Before mov %rsp,%rbp the FP chain still describes foo's frame, so
	// following it skips foo: the case SFrame exists for.
	t.Run("bar+1 skips foo", func(t *testing.T) {
		s, r, want := amd64Program(1)
		mods := NewModuleList(exeModule(nil))
		st := Walk(r, s.window(), mods, Options{Stack: s.bounds()})
		checkFrames(t, st, []wantFrame{want[0], {want[2].pc, want[2].sp, MethodFP}, {want[3].pc, want[3].sp, MethodFP}})
	})
}

// foo lives in a module without .sframe (JIT code, say): its step falls
// back to frame pointers and the walk resumes with SFrame after it.
func TestAMD64MixedMethods(t *testing.T) {
	for _, off := range []uint64{0, 1, 8} {
		t.Run(fmt.Sprintf("bar+%d", off), func(t *testing.T) {
			s, r, want := amd64Program(off)
			want[2].method = MethodFP
			rows := amd64Rows()
			mods := NewModuleList(
				Module{Start: rt(startFn), End: rt(fooFn), Bias: amd64Bias, Rows: rows},
				Module{Start: rt(fooFn), End: rt(barFn), Path: "[anon:jit]"},
				Module{Start: rt(barFn), End: rt(textEnd), Bias: amd64Bias, Rows: rows},
			)
			st := Walk(r, s.window(), mods, Options{Stack: s.bounds()})
			checkFrames(t, st, want)
			checkStop(t, st, nil, 0)
		})
	}
}

// A corrupt table is recorded and that step falls back to frame pointers.
func TestAMD64TableErrorFallsBack(t *testing.T) {
	s, r, want := amd64Program(8)
	rows := &fakeRows{err: &sframe.FormatError{Off: 0x40, Msg: "FRE start beyond function"}}
	rows.add(startFn, mainFn, outermost)
	amd64Prologue(rows, barFn, textEnd) // foo and main have "corrupt" rows
	st := Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{Stack: s.bounds()})
	want[2].method = MethodFP
	want[3].method = MethodFP
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0) // FP==0 after _start's frame
	if !errors.Is(st.LookupErr, ErrTable) || !errors.Is(st.LookupErr, rows.err) {
		t.Errorf("LookupErr = %v, want ErrTable wrapping the format error", st.LookupErr)
	}
	if se, ok := st.LookupErr.(*StepError); !ok || se.Frame != 1 || se.PC != rt(fooFn+0x40) {
		t.Errorf("LookupErr = %#v, want frame 1 at foo's return address", st.LookupErr)
	}
}

// The RA of a noreturn call at the end of foo is the first byte of the
// next function; looking up RA-1 keeps the walk in foo's rows.
func TestLookupAtReturnAddressMinusOne(t *testing.T) {
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	s.sp -= 64
	s.push(rt(startFn + 0x20)) // _start: call foo
	s.push(0)
	spFoo := s.sp
	s.push(rt(barFn)) // foo's last instruction: call abort; RA = next function
	r := amd64Regs(rt(mainFn+0x10), s.sp, 0x1234)
	rows := &fakeRows{}
	rows.add(startFn, mainFn, outermost)
	rows.add(mainFn, mainFn+0x20, amd64Entry)             // "abort", a leaf at entry+0x10
	rows.add(fooFn, barFn, amd64Pushed)                   // foo after push %rbp, up to its end
	rows.add(barFn, textEnd, sframe.Row{Outermost: true}) // would end the walk if looked up at RA
	st := Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{NoFramePointer: true})
	checkFrames(t, st, []wantFrame{
		{rt(mainFn + 0x10), s.sp, MethodRegs},
		{rt(barFn), spFoo, MethodSFrame},
		{rt(startFn + 0x20), 0, MethodSFrame},
	})
	checkStop(t, st, nil, 0)
}

// Rows that use registers: a CFA in rbx (stack realignment) is usable in
// the topmost frame, where rbx is known, and not in a caller.
func TestAMD64RegisterRules(t *testing.T) {
	s, r, _ := amd64Program(8)
	const rbx = 3
	drap := sframe.Row{CFA: cfaReg(rbx, 16), RA: fixedRA, FP: atCFA(-16)}
	spFoo := r.SP() + 48 + 16 // bar's sub and its push of rbp and RA
	r.Put(rbx, spFoo-16)      // rbx = CFA-16
	rows := amd64Rows()
	rows.ranges = slices.Insert(rows.ranges, 0, rowRange{barFn, textEnd, drap}, rowRange{fooFn, barFn, drap})
	st := Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{NoFramePointer: true})
	checkFrames(t, st, []wantFrame{{r.PC, r.SP(), MethodRegs}, {rt(fooFn + 0x40), spFoo, MethodSFrame}})
	checkStop(t, st, ErrRegUnknown, 1)

	// amd64 has no RA register: "RA unchanged" cannot be evaluated.
	rows = amd64Rows()
	rows.ranges = slices.Insert(rows.ranges, 0, rowRange{barFn, textEnd, sframe.Row{CFA: cfaReg(regs.AMD64RSP, 8), RA: same, FP: same}})
	st = Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{NoFramePointer: true})
	checkStop(t, st, ErrRegUnknown, 0)

	// A value rule for the RA ("RA = CFA-8", no dereference) is rejected.
	rows = amd64Rows()
	rows.ranges = slices.Insert(rows.ranges, 0, rowRange{barFn, textEnd, sframe.Row{CFA: cfaReg(regs.AMD64RSP, 8), RA: sframe.Rule{Kind: sframe.RuleCFA, Offset: -8}, FP: same}})
	st = Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{NoFramePointer: true})
	checkStop(t, st, ErrBadRule, 0)

	// A CFA dereference (DRAP: CFA = *(rbp+k)) reads the CFA from memory.
	s, r, want := amd64Program(8)
	slot := r.SP() + 8 // a scratch slot inside bar's 48-byte frame
	s.put(slot, want[1].sp)
	rows = amd64Rows()
	deref := sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleReg, Reg: regs.AMD64RBP, Offset: int64(slot) - int64(r.FP()), Deref: true}, RA: fixedRA, FP: atCFA(-16)}
	rows.ranges = slices.Insert(rows.ranges, 0, rowRange{barFn, textEnd, deref})
	st = Walk(r, s.window(), NewModuleList(exeModule(rows)), Options{NoFramePointer: true})
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
}
