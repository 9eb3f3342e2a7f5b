package sframereport

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fixtureDir holds real binaries made by binutils 2.40 (V1), 2.44 (V2) and
// 2.46+ (V3), each with NAME.readelf.txt, the output of the readelf that
// could dump it (see its README.md).
const fixtureDir = "../../sframe/testdata"

// normalise collapses white space runs and drops blank lines, which is all
// the freedom the comparison allows.
func normalise(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

var rowLine = regexp.MustCompile(`^[0-9a-f]{16} `)

// v1Quirks rewrites our V1 output into what binutils 2.40's readelf (the
// only one that dumps V1) prints: it has no "CFA fixed RA offset" line and
// prints the fixed AMD64 RA as "u" instead of "f". Nothing else differs.
func v1Quirks(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "CFA fixed RA offset:") {
			continue
		}
		if rowLine.MatchString(l) {
			if f := strings.Fields(l); len(f) == 4 && f[3] == "f" {
				f[3] = "u"
				l = strings.Join(f, " ")
			}
		}
		out = append(out, l)
	}
	return out
}

func TestReadelfGoldens(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join(fixtureDir, "*.readelf.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(goldens) == 0 {
		t.Fatalf("no *.readelf.txt fixtures in %s", fixtureDir)
	}
	for _, g := range goldens {
		bin := strings.TrimSuffix(g, ".readelf.txt")
		t.Run(filepath.Base(bin), func(t *testing.T) {
			want, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			rep := Inspect(bin, Options{})
			if rep.Status != StatusOK {
				t.Fatalf("status %s: %s", rep.Status, rep.Error)
			}
			var b bytes.Buffer
			if err := WriteRows(&b, rep); err != nil {
				t.Fatal(err)
			}
			got := normalise(b.String())
			if rep.Header.Version == 1 {
				got = v1Quirks(got)
			}
			exp := normalise(string(want))
			for i := 0; i < max(len(got), len(exp)); i++ {
				var g, e string
				if i < len(got) {
					g = got[i]
				}
				if i < len(exp) {
					e = exp[i]
				}
				if g != e {
					t.Errorf("line %d:\n got  %q\n want %q", i+1, g, e)
					if t.Failed() && i > 0 {
						break
					}
				}
			}
		})
	}
}
