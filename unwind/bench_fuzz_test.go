package unwind

import (
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// sortedRows is a RowFinder over sorted, non-overlapping ranges that does
// not record its lookups (fakeRows does, which would allocate).
type sortedRows []rowRange

func (s sortedRows) Lookup(pc uint64) (sframe.Row, error) {
	i, j := 0, len(s)
	for i < j {
		h := int(uint(i+j) >> 1)
		if s[h].hi > pc {
			j = h
		} else {
			i = h + 1
		}
	}
	if i < len(s) && s[i].lo <= pc {
		return s[i].row, nil
	}
	return sframe.Row{}, sframe.ErrNoFunc
}

// benchStack is recursiveStack(30) with rows: main outermost, foo with
// the standard prologue.
func benchStack(b *testing.B) (*fakeStack, regs.Set, Modules, Modules) {
	s, r, _ := recursiveStack(30)
	rows := &fakeRows{}
	rows.add(mainFn, fooFn, outermost)
	amd64Prologue(rows, fooFn, barFn)
	sframeMods := NewModuleList(exeModule(sortedRows(rows.ranges)))
	fpMods := NewModuleList(exeModule(nil))
	for _, mods := range []Modules{sframeMods, fpMods} {
		if st := Walk(r, s.window(), mods, Options{}); len(st.Frames) != 30 || !st.Complete {
			b.Fatalf("bench stack: %d frames, complete %v, err %v", len(st.Frames), st.Complete, st.Err)
		}
	}
	return s, r, sframeMods, fpMods
}

// BenchmarkWalk unwinds a 30-frame stack from a captured window, reusing
// one Walker as the sampler does.
func BenchmarkWalk(b *testing.B) {
	s, r, sframeMods, fpMods := benchStack(b)
	win := s.window()
	opts := Options{Stack: s.bounds()}
	for _, c := range []struct {
		name string
		mods Modules
	}{{"sframe", sframeMods}, {"fp", fpMods}} {
		b.Run(c.name, func(b *testing.B) {
			var w Walker
			b.ReportAllocs()
			for b.Loop() {
				if st := w.Walk(r, win, c.mods, opts); len(st.Frames) != 30 {
					b.Fatal(st.Err)
				}
			}
		})
	}
	// The same through io.ReaderAt (a live reader), not the window fast path.
	b.Run("sframe-readerat", func(b *testing.B) {
		var w Walker
		mem := &countingReader{r: win}
		b.ReportAllocs()
		for b.Loop() {
			if st := w.Walk(r, mem, sframeMods, opts); len(st.Frames) != 30 {
				b.Fatal(st.Err)
			}
		}
	})
	b.Run("sframe-oneshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := Walk(r, win, sframeMods, opts); len(st.Frames) != 30 {
				b.Fatal(st.Err)
			}
		}
	})
}

// fuzzRows is the palette of rows the fuzzer picks from: every kind of
// row the tests use plus ones with odd offsets, dereferences and
// registers.
var fuzzRows = []sframe.Row{
	amd64Entry, amd64Pushed, amd64Framed, amd64Leave, outermost,
	arm64Leaf, arm64Record, arm64Framed, mangled(arm64Record),
	s390Entry, s390Saved, s390Frame,
	{CFA: sframe.Rule{Kind: sframe.RuleReg, Reg: regs.AMD64RBP, Offset: -8, Deref: true}, RA: fixedRA, FP: atCFA(-16)},
	{CFA: cfaReg(3, 16), RA: sframe.Rule{Kind: sframe.RuleReg, Reg: 3, Offset: 8, Deref: true}, FP: sframe.Rule{Kind: sframe.RuleReg, Reg: 6}},
	{CFA: cfaReg(regs.AMD64RSP, -24), RA: atCFA(8), FP: same},
	{CFA: cfaReg(31, 1<<62), RA: atCFA(-1 << 62), FP: atCFA(0)},
	{CFA: sframe.Rule{Kind: sframe.RuleCFA}, RA: fixedRA},
	{Signal: true},
}

// FuzzWalk walks arbitrary stack bytes with arbitrary registers and rows.
// Whatever the input, the walk must end, stay within MaxDepth, keep SP
// increasing across callers, end either Complete or with a *StepError,
// and only report callers inside a module.
func FuzzWalk(f *testing.F) {
	fuzzbudget.Limit(f)
	// Seeds hold only the used top of each 4 KB fake stack (the body
	// places a short stack at the top of the window): the fuzzer minimises
	// every input that finds new code, at a cost quadratic in its size,
	// and whole 4 KB stacks kept it minimising instead of fuzzing.
	used := func(mem []byte, sp uint64) []byte { return mem[min(sp-stackLow, uint64(len(mem))):] }
	s, r, _ := amd64Program(8)
	f.Add(used(s.mem, r.SP()), uint8(0), r.PC-rt(0), r.SP()-stackLow, r.FP()-stackLow, uint64(0), []byte{0, 1, 2, 3})
	s, r, _ = arm64Program(false, true)
	f.Add(used(s.mem, r.SP()), uint8(1), r.PC, r.SP()-stackLow, r.FP()-stackLow, uint64(pacMask), []byte{5, 6, 7, 8})
	s, r, _ = s390Program(6)
	f.Add(used(s.mem, r.SP()), uint8(2), r.PC, r.SP()-stackLow, r.FP()-stackLow, uint64(0), []byte{9, 10, 11, 4})
	f.Fuzz(fuzzWalkBody)
}

func fuzzWalkBody(t *testing.T, stack []byte, archSel uint8, pc, spOff, fpOff, pacMask uint64, rowSel []byte) {
	{
		arch := []regs.Arch{regs.AMD64, regs.ARM64, regs.S390X}[archSel%3]
		// One module per arch layout: amd64 biased at rt(), the others not.
		bias, lo := uint64(0), uint64(startFn)
		if arch == regs.ARM64 {
			lo = a64Start
		} else if arch == regs.S390X {
			lo = s390Start
		} else {
			bias = amd64Bias
		}
		rows := &fakeRows{}
		for i, sel := range rowSel {
			if i >= 8 {
				break
			}
			start := lo + uint64(i)*0x80
			rows.add(start, start+0x80, fuzzRows[int(sel)%len(fuzzRows)])
		}
		finder := sortedRows(rows.ranges)
		mods := NewModuleList(Module{Start: lo + bias, End: lo + bias + 0x400, Bias: bias, Rows: finder})
		if archSel&0x80 != 0 {
			mods = NewModuleList(Module{Start: lo + bias, End: lo + bias + 0x400, Bias: bias}) // FP only
		}
		set := regs.Set{Arch: arch, PC: pc}
		set.Put(arch.SPReg(), stackLow+spOff%0x1100)
		set.Put(arch.FPReg(), stackLow+fpOff%0x1100)
		if ra := arch.RAReg(); ra >= 0 {
			set.Put(ra, pc^fpOff)
		}
		set.Put(3, spOff^fpOff)
		const maxDepth = 64
		// A stack shorter than the 4 KB the seeds were built in is its top.
		base := uint64(stackLow)
		if n := uint64(len(stack)); n < 0x1000 {
			base += 0x1000 - n
		}
		opts := Options{MaxDepth: maxDepth, PACMask: pacMask}
		if archSel&0x40 != 0 {
			// The link-register rule (functions of 0x80 bytes) and a
			// user's order of unwinders.
			opts.FuncAt = func(pc uint64) (uint64, uint64, bool) { return pc &^ 0x7f, pc&^0x7f + 0x80, true }
			opts.Unwinders = []Method{MethodFP, MethodSFrame, MethodBackChain}[:1+int(archSel>>4&3)%3]
		}
		st := Walk(set, &StackWindow{Base: base, Bytes: stack}, mods, opts)

		if n := len(st.Frames); n < 1 || n > maxDepth {
			t.Fatalf("%d frames", n)
		}
		if st.Complete == (st.Err != nil) {
			t.Fatalf("complete %v with err %v", st.Complete, st.Err)
		}
		var se *StepError
		if st.Err != nil && !errors.As(st.Err, &se) {
			t.Fatalf("err %T %v is not a StepError", st.Err, st.Err)
		}
		for i := 1; i < len(st.Frames); i++ {
			prev, cur := st.Frames[i-1], st.Frames[i]
			if cur.SP < prev.SP || (i > 1 && cur.SP == prev.SP) {
				t.Fatalf("frame %d SP %#x after %#x", i, cur.SP, prev.SP)
			}
			if cur.SP%8 != 0 {
				t.Fatalf("frame %d SP %#x misaligned", i, cur.SP)
			}
			if _, ok := mods.ModuleAt(cur.PC - 1); !ok {
				t.Fatalf("frame %d PC %#x outside the module", i, cur.PC)
			}
		}
	}
}

// BenchmarkWalkFixture walks the 3-frame DRAP stack through the real
// x86_64-v3-flex.exe section: the cost of sframe.Section.Lookup per frame.
func BenchmarkWalkFixture(b *testing.B) {
	snap := drapSnapshot(b)
	list, err := snap.ModuleList()
	if err != nil {
		b.Fatal(err)
	}
	var mods Modules = list // boxed once: a slice converted per call would allocate
	win := &StackWindow{Base: snap.Window.Base, Bytes: snap.Window.Bytes}
	var w Walker
	b.ReportAllocs()
	for b.Loop() {
		if st := w.Walk(snap.Regs, win, mods, Options{NoFramePointer: true}); !st.Complete {
			b.Fatal(st.Err)
		}
	}
}
