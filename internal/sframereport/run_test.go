package sframereport

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var holeSyms = []testSym{{"covered", 0x1000, 16}, {"hole", 0x1020, 0x20}, {"small_hole", 0x1010, 8}}

func TestInspectCoverage(t *testing.T) {
	p := writeTemp(t, "good", buildExec(v2Section(0x2000, 0x1000), holeSyms))
	rep := Inspect(p, Options{Top: -1})
	if rep.Status != StatusOK {
		t.Fatalf("status %s: %s", rep.Status, rep.Error)
	}
	c := rep.Coverage
	if c.ExecBytes != 0x40 || c.CoveredBytes != 16 || c.FDEBytesOutsideExec != 0 {
		t.Errorf("exec %d covered %d outside %d, want 64 16 0", c.ExecBytes, c.CoveredBytes, c.FDEBytesOutsideExec)
	}
	if c.Percent != 25 {
		t.Errorf("percent %v, want 25", c.Percent)
	}
	if c.Functions != 3 || c.FunctionsWithFDE != 1 || c.FunctionsWithoutFDE != 2 || c.BytesWithoutFDE != 0x28 {
		t.Errorf("functions %d/%d/%d bytes %d", c.Functions, c.FunctionsWithFDE, c.FunctionsWithoutFDE, c.BytesWithoutFDE)
	}
	if len(c.Uncovered) != 2 || c.Uncovered[0].Name != "hole" || c.Uncovered[1].Name != "small_hole" {
		t.Errorf("uncovered %+v, want hole then small_hole", c.Uncovered)
	}
	if rep.Stats.Functions != 1 || rep.Stats.Rows != 2 {
		t.Errorf("stats %+v", rep.Stats)
	}
	if rep.Section.Source != "PT_GNU_SFRAME" || rep.Section.Vaddr != 0x2000 {
		t.Errorf("section %+v", rep.Section)
	}

	var sum bytes.Buffer
	WriteSummary(&sum, rep)
	for _, want := range []string{"SFrame version 2", "16 of 64 executable bytes (25.0%)", "32  0x1020", "hole"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

func TestRowsEndToEnd(t *testing.T) {
	p := writeTemp(t, "good", buildExec(v2Section(0x2000, 0x1000), nil))
	var out, errw bytes.Buffer
	if o := Run(&out, &errw, []string{p}, ModeRows); o != OutcomeOK {
		t.Fatalf("outcome %d, stderr %s", o, errw.String())
	}
	if out.String() != v2Rows {
		t.Errorf("rows:\n%s\nwant:\n%s", out.String(), v2Rows)
	}
}

// TestOutcomes checks the results the CLI turns into exit codes: 0 all
// good, 1 some file without SFrame, 2 some corrupt or unreadable file; and
// that a bad file does not stop the others.
func TestOutcomes(t *testing.T) {
	good := writeTemp(t, "good", buildExec(v2Section(0x2000, 0x1000), holeSyms))
	none := writeTemp(t, "none", buildExec(nil, holeSyms))
	bad := v2Section(0x2000, 0x1000)
	bad[0x1c+8] = 9 // FDE's first FRE offset now points past the FRE sub-section
	corrupt := writeTemp(t, "corrupt", buildExec(bad, holeSyms))
	truncated := writeTemp(t, "truncated", buildExec(v2Section(0x2000, 0x1000)[:30], nil))
	notELF := writeTemp(t, "text", []byte("hello, world\n"))
	missing := filepath.Join(t.TempDir(), "missing")

	for _, tc := range []struct {
		name  string
		paths []string
		want  Outcome
	}{
		{"good", []string{good}, OutcomeOK},
		{"none", []string{none}, OutcomeNoSFrame},
		{"good+none", []string{good, none}, OutcomeNoSFrame},
		{"corrupt", []string{corrupt}, OutcomeCorrupt},
		{"truncated", []string{truncated}, OutcomeCorrupt},
		{"not elf", []string{notELF}, OutcomeCorrupt},
		{"missing", []string{missing}, OutcomeCorrupt},
		{"corrupt first", []string{corrupt, none, good}, OutcomeCorrupt},
	} {
		for _, mode := range []Mode{ModeSummary, ModeRows, ModeJSON} {
			var out, errw bytes.Buffer
			got := Run(&out, &errw, tc.paths, mode)
			if got != tc.want {
				t.Errorf("%s mode %d: outcome %d, want %d", tc.name, mode, got, tc.want)
			}
			all := out.String() + errw.String()
			for _, p := range tc.paths {
				// readelf names no file when dumping only one.
				single := mode == ModeRows && len(tc.paths) == 1 && tc.want == OutcomeOK
				if !single && !strings.Contains(all, p) {
					t.Errorf("%s mode %d: output never names %s:\n%s", tc.name, mode, p, all)
				}
			}
			if tc.want == OutcomeCorrupt && !strings.Contains(errw.String(), tc.paths[0]+":") {
				t.Errorf("%s mode %d: stderr lacks the file name: %q", tc.name, mode, errw.String())
			}
			// The good file after a bad one is still reported in full.
			if tc.name == "corrupt first" && mode == ModeRows && !strings.Contains(out.String(), "func idx [0]") {
				t.Errorf("good file after corrupt one not dumped:\n%s", out.String())
			}
		}
	}
}
