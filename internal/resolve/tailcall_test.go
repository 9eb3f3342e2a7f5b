package resolve

import (
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// TestTailCallsAsync: under AsyncLines the tail-call frames come late (the
// call sites' units load in the background, the stack pending until then)
// but end up as dump's, which waits for them.
func TestTailCallsAsync(t *testing.T) {
	needRoot(t)
	tg := tailCallTarget(t)
	target := openTarget(t, tg.PID())
	walks := target.walks(t, target.proc.Threads())
	// Each way starts from nothing loaded.
	fresh := target.freshSymbols
	fresh()
	want, tails := target.nameAll(t, walks, SymbolOptions{})
	if tails == 0 {
		t.Fatalf("no tail-call frames in %d stacks: the test proves nothing", len(walks))
	}
	fresh()
	async := SymbolOptions{AsyncLines: true}
	pendingSeen := false
	for i, w := range walks {
		deadline := time.Now().Add(20 * time.Second)
		for {
			fr, pending := target.symbolizeFrames(w, async)
			if !pending {
				if !slices.EqualFunc(fr, want[i], func(a, b profile.Frame) bool { return a == b }) {
					t.Errorf("stack %d:\n async %+v\n dump  %+v", i, fr, want[i])
				}
				break
			}
			pendingSeen = true
			if time.Now().After(deadline) {
				t.Fatalf("stack %d still pending", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if !pendingSeen {
		t.Error("nothing was pending under AsyncLines: the background path was not exercised")
	}
	t.Logf("%d stacks, %d tail-call frames", len(walks), tails)
}
