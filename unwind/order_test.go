package unwind

import (
	"errors"
	"slices"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

func TestParseUnwinders(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Method
		bad  bool
	}{
		{in: "sframe", want: []Method{MethodSFrame}},
		{in: "sframe,cfi,fp", want: []Method{MethodSFrame, MethodCFI, MethodFP}},
		{in: "fp, sframe", want: []Method{MethodFP, MethodSFrame}},
		{in: "cfi,backchain", want: []Method{MethodCFI, MethodBackChain}},
		{in: "", bad: true},
		{in: "sframe,", bad: true},
		{in: "dwarf", bad: true},
		{in: "fp,fp", bad: true},
	} {
		got, err := ParseUnwinders(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("ParseUnwinders(%q) = %v, %v", c.in, got, err)
		}
		if err == nil && formatUnwinders(got) != formatUnwinders(c.want) {
			t.Errorf("formatUnwinders(%v) = %q", got, formatUnwinders(got))
		}
	}
	if err := CheckUnwinders(regs.S390X, []Method{MethodSFrame, MethodFP}); err == nil {
		t.Error("fp accepted on s390x")
	}
	if err := CheckUnwinders(regs.AMD64, []Method{MethodBackChain}); err == nil {
		t.Error("backchain accepted on amd64")
	}
	if err := CheckUnwinders(regs.ARM64, DefaultUnwinders(regs.ARM64)); err != nil {
		t.Error(err)
	}
	if err := CheckUnwinders(regs.S390X, DefaultUnwinders(regs.S390X)); err != nil {
		t.Error(err)
	}
}

// foo has no SFrame row (JIT code): with SFrame alone the walk stops there
// and says what was allowed; the default order falls back to frame
// pointers for it; an explicit order is followed per frame.
func TestUnwindersOrder(t *testing.T) {
	s, r, want := amd64Program(8)
	rows := amd64Rows()
	mods := NewModuleList(
		Module{Start: rt(startFn), End: rt(fooFn), Bias: amd64Bias, Rows: rows},
		Module{Start: rt(fooFn), End: rt(barFn), Path: "[anon:jit]"},
		Module{Start: rt(barFn), End: rt(textEnd), Bias: amd64Bias, Rows: rows},
	)

	st := Walk(r, s.window(), mods, Options{Stack: s.bounds(), Unwinders: []Method{MethodSFrame}})
	checkFrames(t, st, want[:2])
	checkStop(t, st, ErrNoUnwindInfo, 1)
	var nc *NotCoveredError
	if !errors.As(st.Err, &nc) || !slices.Equal(nc.Allowed, []Method{MethodSFrame}) {
		t.Errorf("err %v does not say which unwinders were allowed", st.Err)
	}

	// Where SFrame covers every frame, SFrame alone equals the default.
	full := NewModuleList(exeModule(amd64Rows()))
	def := Walk(r, s.window(), full, Options{Stack: s.bounds()})
	only := Walk(r, s.window(), full, Options{Stack: s.bounds(), Unwinders: []Method{MethodSFrame}})
	checkFrames(t, def, want)
	checkFrames(t, only, want)

	// Frame pointers first: every caller found by them (bar is past its
	// prologue, so the chain is right), SFrame never asked.
	rows.lookups = nil
	st = Walk(r, s.window(), mods, Options{Stack: s.bounds(), Unwinders: []Method{MethodFP, MethodSFrame}})
	fp := slices.Clone(want)
	for i := 1; i < len(fp); i++ {
		fp[i].method = MethodFP
	}
	checkFrames(t, st, fp)
	checkStop(t, st, nil, 0)
	if len(rows.lookups) != 0 {
		t.Errorf("SFrame looked up %#x with fp first", rows.lookups)
	}

	// NoCFI and NoFramePointer still remove methods from the order.
	st = Walk(r, s.window(), mods, Options{Stack: s.bounds(), NoFramePointer: true})
	checkStop(t, st, ErrNoUnwindInfo, 1)
	if !errors.As(st.Err, &nc) || !slices.Equal(nc.Allowed, []Method{MethodSFrame, MethodCFI}) {
		t.Errorf("NoFramePointer: err %v", st.Err)
	}

	// No allocation beyond the default walk's.
	var w Walker
	opts := Options{Stack: s.bounds(), Unwinders: []Method{MethodSFrame, MethodFP}}
	w.Walk(r, s.window(), &mods, opts)
	if n := testing.AllocsPerRun(20, func() { w.Walk(r, s.window(), &mods, opts) }); n > 1 {
		t.Errorf("%v allocations per walk", n)
	}
}
