package sframereport

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// FuzzInspect feeds arbitrary bytes through everything the inspector does
// with a file: ELF parsing, relocation and symbol reading, coverage and all
// three renderings. Bad input must give a status and an error, never a
// panic.
func FuzzInspect(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	f.Add(buildExec(v2Section(0x2000, 0x1000), holeSyms))
	f.Add(buildExec(nil, holeSyms))
	// Only these built, small executables: the fixture files (2-5 KB)
	// made the fuzzer spend its time minimising (cost quadratic in the
	// input's size) instead of fuzzing; TestInspectFixturesAllOK covers
	// them.
	f.Fuzz(func(t *testing.T, data []byte) {
		rep := inspectReader("fuzz", bytes.NewReader(data), Options{Functions: true, Top: -1})
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
