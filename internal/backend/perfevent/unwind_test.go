//go:build linux

package perfevent

import (
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// TestUnwindCopiedStacks walks samples of split-sframe3 (no frame
// pointers: SFrame only) with the unwind package over the copied window
// alone, no live memory behind it: hot and cold unwind to a or b and then
// main with SFrame, so the copy holds every byte the walk needs.
func TestUnwindCopiedStacks(t *testing.T) {
	if regs.Host() != regs.AMD64 {
		t.Skip("the committed targets are amd64")
	}
	tg := targets.Start(t, "split-sframe3")
	cache := modules.NewModuleCache()
	defer cache.Close()
	space, err := modules.LoadAddressSpace(tg.PID(), cache)
	if err != nil {
		t.Fatal(err)
	}
	var mods []unwind.Module
	for _, em := range space.Exec {
		m := unwind.Module{Start: em.Start, End: em.End, Bias: em.Bias, Path: em.Path, IsVDSO: em.IsVDSO}
		if em.Module != nil {
			m.SFrame = em.Module.SFrame
		}
		mods = append(mods, m)
	}
	list := unwind.NewModuleList(mods...)
	st, _ := loadSyms(t, tg.PID(), targets.Path("split-sframe3"))

	s := openOrSkip(t, tg.PID(), Options{Rate: 499})
	var w unwind.Walker
	walked, whole := 0, 0
	var bad []string
	_, _, err = collect(t, s, time.Second, func(sm *backend.Sample) bool {
		leaf := st.name(sm.Regs.PC)
		if leaf != "hot" && leaf != "cold" {
			return false
		}
		walked++
		win := &unwind.StackWindow{Base: sm.StackAddr, Bytes: sm.Stack}
		stack := w.Walk(sm.Regs, win, &list, unwind.Options{NoFramePointer: true, NoCFI: true})
		var names []string
		for i, f := range stack.Frames {
			pc := f.PC
			if i > 0 {
				pc--
			}
			names = append(names, st.name(pc))
		}
		want := map[string]string{"hot": "a", "cold": "b"}[leaf]
		if len(names) >= 3 && names[1] == want && names[2] == "main" &&
			stack.Frames[1].Method == unwind.MethodSFrame && stack.Frames[2].Method == unwind.MethodSFrame {
			whole++
		} else if len(bad) < 3 {
			bad = append(bad, leaf+": "+joinNames(names)+" err="+errString(stack.Err))
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples in hot/cold walked, %d reached main with SFrame from the copy alone", walked, whole)
	if walked < 50 {
		t.Fatalf("only %d samples in hot or cold", walked)
	}
	if whole < walked*95/100 {
		t.Errorf("%d of %d walks reached main; first failures: %v", whole, walked, bad)
	}
}

func joinNames(n []string) string {
	s := ""
	for i, x := range n {
		if i > 0 {
			s += " <- "
		}
		s += x
	}
	return s
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
