package sframe

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtures lists the ELF files in testdata that have a readelf golden.
func fixtures(t testing.TB) []string {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.readelf.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, g := range goldens {
		files = append(files, strings.TrimSuffix(g, ".readelf.txt"))
	}
	return files
}

func TestFixtures(t *testing.T) {
	files := fixtures(t)
	if len(files) == 0 {
		t.Skip("no fixtures in testdata yet")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			golden, err := os.ReadFile(path + ".readelf.txt")
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := FromELF(f)
			if err != nil {
				t.Fatal(err)
			}
			var relocSyms map[uint64]bool
			if f.Type == elf.ET_REL && s.Header().Version < 3 {
				syms, err := f.Symbols()
				if err != nil {
					t.Fatal(err)
				}
				relocSyms = map[uint64]bool{}
				for _, sym := range syms {
					if elf.ST_TYPE(sym.Info) == elf.STT_FUNC || elf.ST_TYPE(sym.Info) == elf.STT_SECTION {
						relocSyms[sym.Value] = true
					}
				}
			}
			checkGolden(t, filepath.Base(path), s, string(golden), relocSyms)
		})
	}
}
