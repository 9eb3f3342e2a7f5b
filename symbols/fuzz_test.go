package symbols

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes through elf.NewFile, Load and Lookup.
// Load may reject the input, but must not panic, and what it accepts must
// keep the table's invariants.
func FuzzLoad(f *testing.F) {
	for _, bin := range testBinaries {
		b, err := os.ReadFile(filepath.Join("testdata", bin))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2]) // section headers cut off
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := LoadReaderAt(bytes.NewReader(data))
		if err != nil {
			if tab != nil {
				t.Fatal("error with a table")
			}
			return
		}
		var prev *Symbol
		for i := range tab.syms {
			s := &tab.syms[i]
			if s.Size == 0 {
				t.Fatalf("symbol %q with size 0", s.Raw)
			}
			if prev != nil && prev.Start >= s.Start {
				t.Fatalf("symbols out of order: %#x then %#x", prev.Start, s.Start)
			}
			prev = s
			for _, a := range []uint64{s.Start, s.Start + s.Size/2, s.Start + s.Size - 1} {
				got, ok := tab.Lookup(a)
				if !ok || !got.Contains(a) {
					t.Fatalf("Lookup(%#x) = %+v, %v inside %+v", a, got, ok, *s)
				}
				if fn, _ := Describe(got, ok, a, "x"); fn == "" && s.Name != "" {
					t.Fatalf("empty description for %+v", got)
				}
			}
			if got, ok := tab.Lookup(s.Start); !ok || got.Start != s.Start {
				t.Fatalf("Lookup(start %#x) = %+v, %v", s.Start, got, ok)
			}
		}
		tab.Lookup(0)
		tab.Lookup(^uint64(0))
	})
}
