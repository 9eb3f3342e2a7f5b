package resolve

import (
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/unwind"
)

// uncachedFrames names frames as symbolizeFrames does, without the
// Resolver's name cache: the reference the cache must agree with.
func uncachedFrames(r *Resolver, frames []unwind.Frame, opt SymbolOptions) []profile.Frame {
	var out []profile.Frame
	var pending bool
	for i, f := range frames {
		if i > 0 {
			out = r.syms.appendTailCalls(out, r, frames[i-1], f, opt, &pending)
		}
		out = r.syms.appendFrames(out, r, f, opt, &pending)
	}
	return out
}

func sameFrames(a, b []profile.Frame) bool {
	return slices.EqualFunc(a, b, func(x, y profile.Frame) bool { return x == y })
}

// TestNameCacheAgrees: stacks named through the cache (hits from the
// second thread of a kind on) are the frames naming each frame afresh
// gives, with every option that changes names; for 200 threads the cache
// holds far fewer entries than the frames named.
func TestNameCacheAgrees(t *testing.T) {
	needRoot(t)
	for _, name := range []string{"manythreads-sframe3", "chains-sframe3", "signals-sframe3"} {
		t.Run(name, func(t *testing.T) {
			args := []string{}
			if name == "manythreads-sframe3" {
				args = []string{"200"}
			}
			tg := targets.Start(t, name, args...)
			target := openTarget(t, tg.PID())
			tids, err := procmaps.Threads(tg.PID())
			if err != nil {
				t.Fatal(err)
			}
			walks := target.walks(t, tids)
			if len(walks) == 0 {
				t.Fatal("no walks")
			}
			for _, opt := range []SymbolOptions{{}, {NoInline: true}, {NoLines: true}, {AsyncLines: true}} {
				named, entries := 0, target.named.n
				for pass := range 2 {
					for i, w := range walks {
						got, pending := target.symbolizeFrames(w, opt)
						if pending {
							continue // AsyncLines, not loaded yet: not kept
						}
						if want := uncachedFrames(target.Resolver, w, opt); !sameFrames(got, want) {
							t.Fatalf("%+v pass %d stack %d:\n cached   %+v\n uncached %+v", opt, pass, i, got, want)
						}
						named += len(w)
					}
				}
				// 200 threads of three kinds share most frames. (The
				// waiting and the async form share entries.)
				if added := target.named.n - entries; added == 0 && !opt.AsyncLines || name == "manythreads-sframe3" && added > named/4 {
					t.Errorf("%+v: %d cache entries for %d frames named", opt, added, named)
				}
			}
		})
	}
}

// TestNameCacheNotPending: a stack named while its lines were still
// loading (AsyncLines) is not kept as it was: once they load, Rename gives
// file:line.
func TestNameCacheNotPending(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	gate := make(chan struct{})
	HoldLinesForTest(gate)
	defer HoldLinesForTest(nil)
	target := openTarget(t, tg.PID())
	target.opts.Symbols.AsyncLines = true
	walks := target.walks(t, target.proc.Threads())
	var pending [][]unwind.Frame
	for _, w := range walks {
		if st := target.Name(unwind.Stack{Frames: w}); st.Pending != nil {
			pending = append(pending, st.Pending)
		}
	}
	close(gate)
	if len(pending) == 0 {
		t.Fatal("no stack pending while the lines were held back")
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, w := range pending {
		for {
			frames, ok := target.Rename(w)
			if ok {
				if !slices.ContainsFunc(frames, func(f profile.Frame) bool { return f.Line > 0 }) {
					t.Errorf("renamed without a line: %+v", frames)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("lines not ready 20 s after they were let go")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A changed address space drops the cache: the same PC may be another
// module's code now.
func TestNameCacheReload(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	for _, w := range target.walks(t, target.proc.Threads()) {
		target.Name(unwind.Stack{Frames: w})
	}
	if target.named.n == 0 {
		t.Fatal("nothing cached")
	}
	if err := target.Reload(); err != nil {
		t.Fatal(err)
	}
	if target.named.n != 0 || len(target.named.frames) != 0 {
		t.Errorf("%d entries kept across a reload", target.named.n)
	}
}
