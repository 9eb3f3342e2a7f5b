package resolve

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/profile"
)

func sampleLearned() *learnedNames {
	return &learnedNames{
		frames: map[uint64][]debuginfo.Frame{
			0x1000: {{Function: "inner", File: "a.c", Line: 12, Inlined: true}, {Function: "outer", File: "a.c", Line: 40}},
			0x1004: {{Function: "outer", File: "a.c", Line: 41}},
			0x2abc: nil, // looked up, no source: an answer too
		},
		chains: map[chainKey][]debuginfo.TailCallFrame{
			{caller: 0x1008, callee: 0x3000}:                       {{Func: 0x2000, ReturnPC: 0x2010}},
			{caller: 0x1008, callee: 0x3000, calleeModule: 0x9e37}: nil,
			{caller: 0x10, callee: 0x20}:                           {{Func: 1, ReturnPC: 2}, {Func: 3, ReturnPC: 4}},
		},
	}
}

// sameLearned compares two learnedNames, taking nil and empty slices as
// the same answer (none).
func sameLearned(a, b *learnedNames) bool {
	if len(a.frames) != len(b.frames) || len(a.chains) != len(b.chains) {
		return false
	}
	for pc, fr := range a.frames {
		got, ok := b.frames[pc]
		if !ok || !slices.Equal(fr, got) {
			return false
		}
	}
	for k, c := range a.chains {
		got, ok := b.chains[k]
		if !ok || !slices.Equal(c, got) {
			return false
		}
	}
	return true
}

func TestLearnedRoundTrip(t *testing.T) {
	ln := sampleLearned()
	b := ln.appendBinary(nil)
	got, err := unmarshalLearned(b)
	if err != nil {
		t.Fatal(err)
	}
	if !sameLearned(ln, got) {
		t.Fatalf("decoded %+v, want %+v", got, ln)
	}
	if again := got.appendBinary(nil); !slices.Equal(again, b) {
		t.Fatal("the form is not canonical: encoding the decoded value differs")
	}
	// Every proper prefix is refused with an offset inside the input.
	for n := range len(b) {
		_, err := unmarshalLearned(b[:n])
		var fe *LearnedFormatError
		if !errors.As(err, &fe) || fe.Offset > n {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
	if _, err := unmarshalLearned(append(b, 0)); err == nil {
		t.Fatal("a trailing byte was accepted")
	}
}

func TestLearnedRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"string index past the table", "function 0: not below the 0 strings", []byte{0, 1, 0x10, 1, 0, 0, 1, 0, 0}},
		{"PCs not ascending", "does not ascend", []byte{0, 2, 0x10, 0, 0, 0, 0}},
		{"huge count", "more than the bound", binary.AppendUvarint(nil, 1<<40)},
		{"inlined flag 2", "inlined flag 2", []byte{1, 0, 1, 0x10, 1, 0, 0, 7, 2, 0}},
		{"duplicate chain", "given twice", []byte{0, 0, 2, 1, 2, 0, 0, 1, 2, 0, 0}},
		{"trailing bytes", "past the last chain", []byte{0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := unmarshalLearned(tc.b)
			var fe *LearnedFormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a *LearnedFormatError saying %q", err, tc.want)
			}
		})
	}
}

// FuzzUnmarshalLearned: no input panics or reads out of range; what
// decodes encodes back to the same bytes (the form is canonical), so a
// cache file means one thing only.
func FuzzUnmarshalLearned(f *testing.F) {
	f.Add(sampleLearned().appendBinary(nil))
	f.Add((&learnedNames{}).appendBinary(nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ln, err := unmarshalLearned(b)
		if err != nil {
			var fe *LearnedFormatError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > len(b) {
				t.Fatalf("error %v: not a *LearnedFormatError inside the input", err)
			}
			return
		}
		again, err := unmarshalLearned(ln.appendBinary(nil))
		if err != nil || !sameLearned(ln, again) {
			t.Fatalf("re-encoded form does not decode to the same: %v", err)
		}
	})
}

// TestLearnedNames: naming keeps what it found of each module's addresses
// (source frames and tail-call chains) in the cache, and a later resolver
// names the same stacks the same from it alone: no line table, unit or
// call site is read. What a module learns under one key is not used under
// another, and nothing is kept from a run whose DWARF reads failed.
func TestLearnedNames(t *testing.T) {
	needRoot(t)
	tg := tailCallTarget(t)
	target, name := learningTarget(t, tg.PID())
	fresh := target.freshSymbols
	dir := target.opts.Symbols.CacheDir
	linesRead := func() (n int) {
		for _, ms := range target.syms.mods {
			if ms.linesStarted.Load() {
				n++
			}
		}
		return n
	}
	sameStacks := func(a, b [][]profile.Frame) bool {
		return slices.EqualFunc(a, b, func(x, y []profile.Frame) bool { return slices.Equal(x, y) })
	}

	fresh()
	want, tails := name()
	if tails == 0 {
		t.Fatalf("no tail-call frames in %d stacks: the test proves nothing", len(want))
	}
	if linesRead() == 0 {
		t.Fatal("the first naming read no line tables")
	}
	fresh() // saves
	// A prefetch starts no line tables where answers were learned.
	target.PrefetchCommon()
	for _, ms := range target.syms.mods {
		<-ms.loaded
	}
	time.Sleep(50 * time.Millisecond) // (the prefetch's goroutine would start them by now)
	got, _ := name()
	if !sameStacks(got, want) {
		t.Fatalf("named from what was learned:\n%v\nwant\n%v", got, want)
	}
	if n := linesRead(); n != 0 {
		t.Fatalf("%d modules read their line tables although every answer was learned", n)
	}
	chains := 0
	for _, ms := range target.syms.mods {
		for _, c := range ms.seen.chainsOrNil() {
			chains += len(c)
		}
	}
	if chains == 0 {
		t.Fatal("no tail-call link was learned")
	}

	// Another key (the object's size, as if it were another file): what
	// was learned is not used, and the lines are read again.
	exe := target.space.Exec[0].Module
	for i := range target.space.Exec {
		if m := target.space.Exec[i].Module; m != nil && filepath.Base(m.Path) == "tailcall" {
			exe = m
		}
	}
	exe.Key.Size++
	fresh()
	if got, _ := name(); !sameStacks(got, want) {
		t.Fatal("stacks named under another key differ")
	}
	if linesRead() == 0 {
		t.Fatal("answers learned under another key were used")
	}
	exe.Key.Size--
	fresh() // (it keeps its answers under the other key)

	// A run that may have missed something learns nothing.
	path := filepath.Join(dir, exe.BuildID, "names")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	fresh()
	name()
	for m, ms := range target.syms.mods {
		if m == exe {
			ms.unsure.Store(true)
		}
	}
	fresh()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unsure run kept its answers (%v)", err)
	}
	name()
	fresh()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a sure run kept nothing: %v", err)
	}
}

// learningTarget attaches to pid, walks every thread once, and gives
// the resolver a cache directory of its own; name names those walks
// (waiting for every line), as often as a test asks.
func learningTarget(t *testing.T, pid int) (target *liveTarget, name func() ([][]profile.Frame, int)) {
	t.Helper()
	target = openTarget(t, pid)
	walks := target.walks(t, target.proc.Threads())
	target.opts.Symbols.CacheDir = t.TempDir()
	opt := SymbolOptions{CacheDir: target.opts.Symbols.CacheDir}
	return target, func() ([][]profile.Frame, int) { return target.nameAll(t, walks, opt) }
}

func (ln *learnedNames) chainsOrNil() map[chainKey][]debuginfo.TailCallFrame {
	if ln == nil {
		return nil
	}
	return ln.chains
}

// tailCallTarget builds and starts testdata/targets/tailcall.c.
func tailCallTarget(t *testing.T) *targets.Target {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	bin := filepath.Join(t.TempDir(), "tailcall")
	if out, err := exec.Command("gcc", "-O2", "-g", "-pthread", "-o", bin, "../../testdata/targets/tailcall.c", "../../testdata/targets/tailcall_lib.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return startReady(t, bin)
}
