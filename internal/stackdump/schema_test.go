package stackdump

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestJSONSchemaDocumented: every field of dump --json has a row in the
// schema table of docs/dump.md, so a field added to the output cannot go
// undocumented.
func TestJSONSchemaDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/dump.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, schema, ok := strings.Cut(doc, "### `--json`")
	if !ok {
		t.Fatal("docs/dump.md has no ### `--json` section")
	}
	// A table row names a field as `name`, `parent[].name` or `.name`.
	rows := map[string]bool{}
	for _, line := range strings.Split(schema, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(line[1:], "|")
		for _, part := range strings.Split(first, "`") {
			part = strings.TrimSpace(part)
			if part == "" || part == "," {
				continue
			}
			part = strings.TrimSuffix(part, "[]")
			if i := strings.LastIndexAny(part, ".]"); i >= 0 {
				part = part[i+1:]
			}
			rows[part] = true
		}
		// The pauses row lists its members in the meaning column.
		for _, part := range strings.Split(line, "`") {
			if strings.HasSuffix(part, "_ns") {
				rows[part] = true
			}
		}
	}
	var check func(ty reflect.Type, where string)
	check = func(ty reflect.Type, where string) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !rows[name] {
				t.Errorf("dump --json field %s%s is not in docs/dump.md's schema table", where, name)
			}
			et := f.Type
			if et.Kind() == reflect.Slice {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				check(et, where+name+".")
			}
		}
	}
	check(reflect.TypeOf(jsonDump{}), "")
}
