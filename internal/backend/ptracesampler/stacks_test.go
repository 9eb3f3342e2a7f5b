package ptracesampler

import (
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/procmaps"
)

const testMaps = `00400000-00401000 r-xp 00000000 08:01 42 /usr/bin/prog
c000000000-c000400000 rw-p 00000000 00:00 0 
c000400000-c004000000 ---p 00000000 00:00 0 
7f0000000000-7f0000001000 ---p 00000000 00:00 0 
7f0000001000-7f0000801000 rw-p 00000000 00:00 0 
7f0000900000-7f0000910000 rw-p 00000000 00:00 0 
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
`

// The thread stacks are the main thread's [stack] and anonymous mappings
// above a guard; a Go arena and other anonymous memory keep the window.
func TestThreadStacks(t *testing.T) {
	maps, err := procmaps.ParseMaps(strings.NewReader(testMaps))
	if err != nil {
		t.Fatal(err)
	}
	st := stacksOf(maps)
	const window, limit = 16 << 10, 1 << 20
	for _, c := range []struct {
		sp, tp uint64
		want   int
	}{
		{0x7f0000800000, 0, 0x1000},              // pthread stack: its used part, less than the window
		{0x7f0000001000, 0, limit},               // a deep one: at most limit
		{0x7ffc00020f00, 0, 0x100},               // [stack]
		{0xc000001000, 0, window},                // Go heap arena: no guard below
		{0x7f0000900100, 0, window},              // anonymous, no guard
		{0x7f0000900100, 0x7f000090f000, 0xef00}, // anonymous, no guard, the thread pointer above SP: up to it
		{0x7f0000900100, 0x7f0000900000, window}, // the thread pointer below SP: not its stack's top
		{0x7f0000900100, 0x7f0000920000, window}, // the thread pointer in another mapping
		{0x1000, 0, window},                      // no mapping
		{0x400100, 0, window},                    // not writable
		{0x7f0000000800, 0, window},              // the guard itself
	} {
		if got := st.usedStack(c.sp, c.tp, window, limit); got != c.want {
			t.Errorf("sp %#x tp %#x: copy %#x, want %#x", c.sp, c.tp, got, c.want)
		}
	}
}

// A learned copy reaches what the walk needed, on the stack it was
// learned on, and is dropped after learnKeep samples that did not need it.
func TestLearned(t *testing.T) {
	maps, _ := procmaps.ParseMaps(strings.NewReader(testMaps))
	st := stacksOf(maps)
	const window, limit = 16 << 10, 1 << 20
	var l learned
	sp := uint64(0x7f0000700000)
	if !l.learn(sp, 0, backend.StackUse{End: sp + 70000, Missed: 3}, window, st) || l.end != sp+70000 {
		t.Fatalf("learned %+v", l)
	}
	if got := l.window(sp-100, window, limit); got != 70100 {
		t.Errorf("copy below: %d, want 70100", got)
	}
	if got := l.window(sp+60000, window, limit); got != window {
		t.Errorf("copy near the end: %d, want the window", got)
	}
	if got := l.window(0x7ffc00020000, window, limit); got != window {
		t.Errorf("copy on another stack: %d, want the window", got)
	}
	for i := 0; i < learnKeep; i++ {
		if l.end == 0 {
			t.Fatalf("dropped after %d samples, want %d", i, learnKeep)
		}
		l.learn(sp, 0, backend.StackUse{End: sp + 100}, window, st)
	}
	if l.end != 0 {
		t.Errorf("kept %+v after %d samples that did not need it", l, learnKeep)
	}
	// Not a thread stack (a Go arena): nothing learned; an unknown
	// mapping: ask for the maps again.
	if !l.learn(0xc000001000, 0, backend.StackUse{End: 0xc000100000}, window, st) || l.end != 0 {
		t.Errorf("learned on a Go arena: %+v", l)
	}
	if l.learn(0x7e0000000000, 0, backend.StackUse{End: 0x7e0000100000}, window, st) {
		t.Error("an unknown mapping did not ask for the maps again")
	}
	// A stack without a guard mapping, known by its thread pointer: a
	// walk up to below it is learned, one beyond it is not.
	sp = 0x7f0000900100
	if !l.learn(sp, 0x7f000090f000, backend.StackUse{End: 0x7f000090e000}, window, st) || l.end != 0x7f000090e000 {
		t.Errorf("not learned on a stack known by its thread pointer: %+v", l)
	}
	var l2 learned
	if l2.learn(sp, 0x7f000090f000, backend.StackUse{End: 0x7f0000910000}, window, st); l2.end != 0 {
		t.Errorf("learned beyond the thread pointer: %+v", l2)
	}
}
