package resolve

import (
	"testing"
	"time"

	"stacktop/internal/targets"
)

// TestPrefetchLines: prefetching a walk's frames loads the line tables of
// the modules they are in without any naming (the symbolizer reports them
// ready), and does nothing with NoLines.
func TestPrefetchLines(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	walks := target.walks(t, target.proc.Threads())
	if len(walks) == 0 {
		t.Fatal("no walks")
	}
	started := func() (n int) {
		target.syms.mu.Lock()
		defer target.syms.mu.Unlock()
		for _, ms := range target.syms.mods {
			if ms.linesDone != nil {
				n++
			}
		}
		return n
	}
	target.syms.close()
	target.syms = newSymbolizer()
	target.opts.Symbols.NoLines = true
	for _, w := range walks {
		target.PrefetchLines(w)
	}
	if n := started(); n != 0 {
		t.Errorf("with NoLines, line tables of %d modules started loading", n)
	}
	target.opts.Symbols.NoLines = false
	for _, w := range walks {
		target.PrefetchLines(w)
	}
	if n := started(); n < 2 {
		t.Fatalf("line tables of %d modules started loading, want the program's and libc's", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for target.syms.readiness() < int64(started()) {
		if time.Now().After(deadline) {
			t.Fatalf("line tables not ready 20 s after the prefetch (readiness %d)", target.syms.readiness())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
