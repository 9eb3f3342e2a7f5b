package stackdump

import (
	"errors"
	"slices"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/unwind"
)

// TestUnwinderSFrameOnly: on an SFrame build, --unwinder sframe gives the
// default walk's frames as long as SFrame describes them, and stops where
// the default needed another method (libc's CFI), saying which unwinders
// were allowed. The result names the allowed unwinders.
func TestUnwinderSFrameOnly(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	tg := targets.Start(t, "chains-sframe3")
	tg.Stop()
	defer tg.Cont()
	tr := newTracer(t)
	def, err := Run(tr, tg.PID(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	only, err := Run(tr, tg.PID(), Options{Resolve: resolve.Options{Unwinders: []unwind.Method{unwind.MethodSFrame}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(def.Unwinders, []string{"sframe", "cfi", "fp"}) || !slices.Equal(only.Unwinders, []string{"sframe"}) {
		t.Errorf("unwinders: default %v, sframe-only %v", def.Unwinders, only.Unwinders)
	}
	noCFI, err := Run(tr, tg.PID(), Options{Resolve: resolve.Options{NoCFI: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(noCFI.Unwinders, []string{"sframe", "fp"}) {
		t.Errorf("--no-cfi unwinders %v, want sframe,fp", noCFI.Unwinders)
	}
	if len(def.Threads) != len(only.Threads) {
		t.Fatalf("%d threads, then %d", len(def.Threads), len(only.Threads))
	}
	stopped := 0
	for i, d := range def.Threads {
		o := only.Threads[i]
		n := len(o.Frames)
		if n > len(d.Frames) {
			t.Errorf("thread %s: sframe-only has %d frames, default %d", d.Name, n, len(d.Frames))
			continue
		}
		for j := 0; j < n; j++ {
			if o.Frames[j].PC != d.Frames[j].PC || o.Frames[j].Method != d.Frames[j].Method {
				t.Errorf("thread %s frame %d: sframe-only %#x %s (%s), default %#x %s (%s)", d.Name, j,
					o.Frames[j].PC, o.Frames[j].Function, o.Frames[j].Method, d.Frames[j].PC, d.Frames[j].Function, d.Frames[j].Method)
			}
		}
		if n == len(d.Frames) {
			if o.Complete != d.Complete {
				t.Errorf("thread %s: same frames, complete %v vs %v (%v)", d.Name, o.Complete, d.Complete, o.Err)
			}
			continue
		}
		// It stopped where the default used another method.
		stopped++
		if m := d.Frames[n].Method; m == "sframe" {
			t.Errorf("thread %s: sframe-only stopped before frame %d, which the default found by sframe (%v)", d.Name, n, o.Err)
		}
		var nc *unwind.NotCoveredError
		if !errors.Is(o.Err, unwind.ErrNoUnwindInfo) || !errors.As(o.Err, &nc) {
			t.Errorf("thread %s: stop error %v does not say the unwinders did not cover the frame", d.Name, o.Err)
		}
	}
	if stopped == 0 {
		t.Error("no thread needed more than SFrame: the test shows nothing (libc has no .sframe here)")
	}
}
