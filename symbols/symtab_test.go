package symbols

import (
	"debug/elf"
	"errors"
	"maps"
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

// funcValuesOf is FuncValues as the tail-call code built it before, from
// debug/elf's Symbols and DynamicSymbols: the reference FuncValues must
// agree with.
func funcValuesOf(files ...*elf.File) map[string]uint64 {
	names := map[string]uint64{}
	for _, f := range files {
		for _, load := range []func() ([]elf.Symbol, error){f.DynamicSymbols, f.Symbols} {
			syms, _ := load()
			for _, sy := range syms {
				if elf.ST_TYPE(sy.Info) == elf.STT_FUNC && sy.Value != 0 && sy.Name != "" {
					if _, dup := names[sy.Name]; !dup {
						names[sy.Name] = sy.Value
					}
				}
			}
		}
	}
	return names
}

// TestFuncValuesMatchesDebugELF: the name-to-value map read in place is
// the one debug/elf's symbols give, for the C library with its separate
// debug file (both tables of both files, first name wins) and the test
// programs.
func TestFuncValuesMatchesDebugELF(t *testing.T) {
	var sets [][]string
	paths, _ := filepath.Glob(filepath.Join("testdata", "*"))
	for _, p := range paths {
		sets = append(sets, []string{p})
	}
	if out, err := exec.Command("gcc", "-print-file-name=libc.so.6").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); filepath.IsAbs(p) {
			set := []string{p}
			if f, err := elf.Open(p); err == nil {
				if id := buildID(f); len(id) > 2 {
					set = append(set, filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
				}
				f.Close()
			}
			sets = append(sets, set)
		}
	}
	checked := 0
	for _, set := range sets {
		var files []*elf.File
		for _, p := range set {
			if f, err := elf.Open(p); err == nil {
				defer f.Close()
				files = append(files, f)
			}
		}
		if len(files) == 0 {
			continue
		}
		want := funcValuesOf(files...)
		got, err := FuncValues(append(files, nil)...)
		if err != nil {
			t.Fatalf("%v: %v", set, err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%v: %d names, want %d", set, len(got), len(want))
		}
		if len(want) > 0 {
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no object with function symbols was checked")
	}
	t.Logf("%d objects checked", checked)
}
