package debuginfo

import (
	"debug/dwarf"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"stacktop/internal/fuzzbudget"
)

// FuzzLines feeds mutated .debug_info/.debug_abbrev/.debug_line bytes
// (seeded from a tiny program with one inlined call) through the unit index
// and lookups: errors are fine, panics are not.
func FuzzLines(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	bin := buildTiny(f)
	ef, err := elf.Open(bin)
	if err != nil {
		f.Fatal(err)
	}
	data := func(name string) []byte {
		s := ef.Section(name)
		if s == nil {
			return nil
		}
		b, _ := s.Data()
		return b
	}
	info, abbrev, line, str := data(".debug_info"), data(".debug_abbrev"), data(".debug_line"), data(".debug_str")
	ef.Close()
	f.Add(info, abbrev, line)
	f.Fuzz(func(t *testing.T, info, abbrev, line []byte) {
		d, err := dwarf.New(abbrev, nil, nil, info, line, nil, nil, str)
		if err != nil {
			return
		}
		l, err := NewLinesFromDWARF(d)
		if err != nil {
			return
		}
		for _, u := range l.units {
			l.Frames(u.lo, nil)
			l.Frames(u.lo+(u.hi-u.lo)/2, nil)
		}
	})
}

// buildTiny compiles a program of one compilation unit without libc, with
// an inlined call: its DWARF sections are a few hundred bytes. Seeds from
// the C++ test program (kilobytes, and g++ -O2 in every fuzz worker) kept
// the fuzzer minimising, at a cost quadratic in the input's size, instead
// of fuzzing.
func buildTiny(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.c")
	err := os.WriteFile(src, []byte(`static inline int twice(int x) { return x * 2; }
int g;
__attribute__((noinline)) int leaf(int x) { return twice(x) + g; }
void _start(void) { g = leaf(g); for (;;) ; }
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tiny")
	if out, err := exec.Command("gcc", "-O2", "-g", "-nostdlib", "-static", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}
