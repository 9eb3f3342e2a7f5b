package sframereport

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSchemaDoc keeps docs/sframe-inspector.md and the struct tags in step:
// under the heading of each JSON type, the first column of the table must
// list exactly that type's JSON field names, in order.
func TestSchemaDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/sframe-inspector.md")
	if err != nil {
		t.Fatal(err)
	}
	types := []any{Document{}, FileReport{}, ELFInfo{}, SectionInfo{}, HeaderInfo{}, Stats{},
		Coverage{}, ExecRange{}, Uncovered{}, Function{}, Row{}, Rule{}}
	documented := map[string][]string{}
	var cur string
	field := regexp.MustCompile("^\\| `([a-z_]+)` \\|")
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "#### `") {
			cur = strings.Trim(strings.TrimPrefix(l, "#### "), "`")
			documented[cur] = []string{}
			continue
		}
		if strings.HasPrefix(l, "#") {
			cur = ""
		}
		if m := field.FindStringSubmatch(l); m != nil && cur != "" {
			documented[cur] = append(documented[cur], m[1])
		}
	}
	for _, v := range types {
		rt := reflect.TypeOf(v)
		var tags []string
		for f := range rt.Fields() {
			if tag := strings.Split(f.Tag.Get("json"), ",")[0]; tag != "" && tag != "-" {
				tags = append(tags, tag)
			}
		}
		got, ok := documented[rt.Name()]
		if !ok {
			t.Errorf("type %s is not documented", rt.Name())
			continue
		}
		if !slices.Equal(got, tags) {
			t.Errorf("%s: documented fields %v, struct tags %v", rt.Name(), got, tags)
		}
		delete(documented, rt.Name())
	}
	for name := range documented {
		t.Errorf("documented type %s is not a JSON type of the package", name)
	}
}
