package sframereport

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
)

// TestJSONRoundTrip encodes the --json document of real fixtures and of a
// built file, decodes it back into the same types, and requires equality:
// nothing the report holds is lost or renamed on the way.
func TestJSONRoundTrip(t *testing.T) {
	paths := []string{
		writeTemp(t, "good", buildExec(v2Section(0x2000, 0x1000), holeSyms)),
		writeTemp(t, "none", buildExec(nil, nil)),
	}
	for _, f := range []string{"x86_64-v3-flex.o", "aarch64-v3.exe", "s390x-v3-hand.o", "x86_64-v1-plt.exe"} {
		paths = append(paths, filepath.Join(fixtureDir, f))
	}
	var out, errw bytes.Buffer
	if o := Run(&out, &errw, paths, ModeJSON); o != OutcomeNoSFrame {
		t.Fatalf("outcome %d, want %d; stderr %s", o, OutcomeNoSFrame, errw.String())
	}
	var doc Document
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Files) != len(paths) {
		t.Fatalf("%d files in JSON, want %d", len(doc.Files), len(paths))
	}
	for i, p := range paths {
		want := Inspect(p, Options{Functions: true, Top: -1})
		want.sec, want.starts = nil, nil
		if !reflect.DeepEqual(doc.Files[i], want) {
			a, _ := json.Marshal(doc.Files[i])
			b, _ := json.Marshal(want)
			t.Errorf("%s: round trip differs:\n got  %s\n want %s", p, a, b)
		}
	}
	// Spot-check content: the flex object's DRAP row and readelf text.
	flex := doc.Files[2]
	if flex.Stats.FlexFunctions != 2 || flex.Functions[0].Section != ".text" {
		t.Errorf("flex object: stats %+v, function 0 section %q", flex.Stats, flex.Functions[0].Section)
	}
	found := false
	for _, fn := range flex.Functions {
		for _, r := range fn.Rows {
			if r.Readelf == "(fp-8) (fp+0) U" && r.CFA.Kind == "reg" && r.CFA.Deref && r.CFA.Reg == 6 && r.RA.Padding {
				found = true
			}
		}
	}
	if !found {
		t.Error("flex object: no row \"(fp-8) (fp+0) U\" with a dereferenced rbp CFA and RA padding")
	}
}
