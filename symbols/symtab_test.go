package symbols

import (
	"debug/elf"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSymtabMatchesDebugELF: the candidates read straight from .symtab
// are those that debug/elf's Symbols gives, in the same order, for the
// test programs, the C library and its separate debug file.
func TestSymtabMatchesDebugELF(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*"))
	if out, err := exec.Command("gcc", "-print-file-name=libc.so.6").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); filepath.IsAbs(p) {
			paths = append(paths, p)
			if f, err := elf.Open(p); err == nil {
				if id := buildID(f); len(id) > 2 {
					paths = append(paths, filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
				}
				f.Close()
			}
		}
	}
	checked := 0
	for _, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		for _, noBits := range []bool{false, true} {
			syms, err := f.Symbols()
			if errors.Is(err, elf.ErrNoSymbols) {
				syms, err = nil, nil
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			want := appendCandidates(nil, f, syms, noBits)
			got, err := appendSymtab(nil, f, noBits)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (noBits %v): %d candidates, want %d", p, noBits, len(got), len(want))
			}
			if len(want) > 0 {
				checked++
			}
		}
		f.Close()
	}
	if checked == 0 {
		t.Fatal("no object with a .symtab was checked")
	}
	t.Logf("%d objects checked", checked/2)
}
