package stackdump

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/gdbstack"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/unwind"
)

// TestDumpDeepRecursion: a thread 2,000 frames deep (deeprec: deep_rec
// calling itself, CFI only) is dumped whole, equal to gdb frame by frame,
// past the old cap of 256 frames and the 16 KiB stack window; with a
// lower --max-depth (resolve.Options.MaxDepth) the stack is cut there and
// says which limit cut it.
func TestDumpDeepRecursion(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
	tg := targets.Start(t, "deeprec-cfi", "2000")
	res := compareTargetWithGDB(t, tg, func(ThreadStack, int, []gdbstack.Frame) {})
	deep := findThread(t, res, "deep")
	rec := 0
	for _, f := range deep.Frames {
		if f.Function == "deep_rec" {
			rec++
		}
	}
	if rec != 2000 || !deep.Complete {
		t.Errorf("thread deep: %d deep_rec frames of %d, complete %v (%v); want 2000, complete", rec, len(deep.Frames), deep.Complete, deep.Err)
	}

	tg.Stop()
	defer tg.Cont()
	opt := Options{}
	opt.Resolve.MaxDepth = 300
	cut, err := Run(newTracer(t), tg.PID(), opt)
	if err != nil {
		t.Fatal(err)
	}
	deep = findThread(t, cut, "deep")
	if len(deep.Frames) != 300 || deep.Complete || !errors.Is(deep.Err, unwind.ErrMaxDepth) {
		t.Fatalf("with MaxDepth 300: %d frames, complete %v, error %v; want 300 frames cut by the depth limit", len(deep.Frames), deep.Complete, deep.Err)
	}
	if !strings.Contains(deep.Err.Error(), "the limit is 300 frames") {
		t.Errorf("the cut stack does not say which limit cut it: %v", deep.Err)
	}
}

func findThread(t *testing.T, res *Result, name string) ThreadStack {
	t.Helper()
	for _, ts := range res.Threads {
		if ts.Name == name {
			return ts
		}
	}
	t.Fatalf("no thread %q in the dump", name)
	return ThreadStack{}
}
