package stackdump

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// The output of dump --json is described by docs/dump.schema.json (JSON
// Schema 2020-12). These tests keep the two in step: every field of the
// output has a property in the schema and every property a field, and
// real dumps validate against it.

func loadDumpSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../docs/dump.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("docs/dump.schema.json: %v", err)
	}
	return s
}

// schemaValidator checks a decoded JSON value against the part of JSON
// Schema the dump schema uses: $ref into $defs, type, required,
// properties, additionalProperties: false, items, enum, minimum, pattern.
// Anything else in the schema is an error, so the schema cannot claim
// what this check does not enforce.
type schemaValidator struct {
	root map[string]any
	errs []string
}

var schemaKeywords = []string{"$schema", "$id", "$defs", "$ref", "title", "description", "type", "required",
	"properties", "additionalProperties", "items", "enum", "minimum", "pattern"}

func (v *schemaValidator) fail(at, format string, args ...any) {
	v.errs = append(v.errs, at+": "+fmt.Sprintf(format, args...))
}

func (v *schemaValidator) resolve(s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	defs, _ := v.root["$defs"].(map[string]any)
	def, found := defs[name].(map[string]any)
	if !ok || !found {
		v.fail(ref, "unresolved $ref")
		return map[string]any{}
	}
	return def
}

func (v *schemaValidator) check(s map[string]any, x any, at string) {
	s = v.resolve(s)
	for k := range s {
		if !slices.Contains(schemaKeywords, k) {
			v.fail(at, "schema keyword %q is not checked", k)
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, x) {
		v.fail(at, "%v is not one of %v", x, enum)
	}
	switch ty, _ := s["type"].(string); ty {
	case "object":
		obj, ok := x.(map[string]any)
		if !ok {
			v.fail(at, "want an object, got %T", x)
			return
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := obj[r]; !ok {
				v.fail(at, "required %q missing", r)
			}
		}
		for k, val := range obj {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					v.fail(at, "property %q not in the schema", k)
				}
				continue
			}
			v.check(ps, val, at+"."+k)
		}
	case "array":
		arr, ok := x.([]any)
		if !ok {
			v.fail(at, "want an array, got %T", x)
			return
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range arr {
				v.check(items, e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	case "string":
		str, ok := x.(string)
		if !ok {
			v.fail(at, "want a string, got %T", x)
			return
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			v.fail(at, "%q does not match %s", str, p)
		}
	case "integer", "number":
		n, ok := x.(float64)
		if !ok || ty == "integer" && n != float64(int64(n)) {
			v.fail(at, "want an %s, got %v", ty, x)
			return
		}
		if m, ok := s["minimum"].(float64); ok && n < m {
			v.fail(at, "%v below the minimum %v", n, m)
		}
	case "boolean":
		if _, ok := x.(bool); !ok {
			v.fail(at, "want a boolean, got %T", x)
		}
	case "":
		if _, ok := s["enum"]; !ok {
			v.fail(at, "schema without a type or enum")
		}
	default:
		v.fail(at, "schema type %q is not checked", ty)
	}
}

func asStrings(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

// validateDump returns what in doc does not fit the schema.
func validateDump(t *testing.T, schema map[string]any, doc []byte) []string {
	t.Helper()
	var x any
	if err := json.Unmarshal(doc, &x); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	v := &schemaValidator{root: schema}
	v.check(schema, x, "$")
	return v.errs
}

// TestJSONSchemaCoversOutput: the schema's properties are exactly the
// output's fields, object by object, and those the output always writes
// are required.
func TestJSONSchemaCoversOutput(t *testing.T) {
	t.Parallel()
	schema := loadDumpSchema(t)
	v := &schemaValidator{root: schema}
	var check func(ty reflect.Type, s map[string]any, where string)
	check = func(ty reflect.Type, s map[string]any, where string) {
		s = v.resolve(s)
		if s["type"] == "array" {
			s = v.resolve(s["items"].(map[string]any))
		}
		props, _ := s["properties"].(map[string]any)
		var fields []string
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
			ps, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("dump --json field %s%s has no property in docs/dump.schema.json", where, name)
				continue
			}
			if required := slices.Contains(asStrings(s["required"]), name); required == (opts == "omitempty") {
				t.Errorf("%s%s: required in the schema %v, omitted when empty %v", where, name, required, opts == "omitempty")
			}
			et := f.Type
			if et.Kind() == reflect.Slice {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				check(et, ps, where+name+".")
			}
		}
		var extra []string
		for k := range props {
			if !slices.Contains(fields, k) {
				extra = append(extra, where+k)
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Errorf("the schema has properties the output does not write: %v", extra)
		}
	}
	check(reflect.TypeOf(jsonDump{}), schema, "")
	if len(v.errs) > 0 {
		t.Error(v.errs)
	}
}

// TestJSONSchemaValidatesDumps: real dumps (C threads with inlined and
// SFrame frames, a Go program, a frozen process) validate against the
// schema, and a document the schema must refuse is refused.
func TestJSONSchemaValidatesDumps(t *testing.T) {
	t.Parallel()
	needPtrace(t)
	schema := loadDumpSchema(t)
	for _, tc := range []struct {
		target string
		opts   Options
	}{
		{"chains-sframe3", Options{}},
		{"cxxinline-sframe3", Options{}},
		{"goprog", Options{}},
		{"manythreads-fp", Options{Freeze: true}},
	} {
		tg := targets.Start(t, tc.target)
		res, err := Run(newTracer(t), tg.PID(), tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		var buf bytes.Buffer
		if err := WriteJSON(&buf, res); err != nil {
			t.Fatal(err)
		}
		if errs := validateDump(t, schema, buf.Bytes()); len(errs) > 0 {
			t.Errorf("%s: dump --json does not fit docs/dump.schema.json:\n%s", tc.target, strings.Join(errs, "\n"))
		}
	}
	for name, bad := range map[string]string{
		"no pid":      `{"command": "x", "threads": [], "pauses": {"min_ns": 0, "median_ns": 0, "max_ns": 0, "wall_ns": 0}}`,
		"bad method":  `{"pid": 1, "command": "x", "threads": [{"tid": 1, "name": "x", "state": "R", "complete": true, "stopped_ns": 0, "frames": [{"pc": "0x1", "offset": 0, "method": "guess"}]}], "pauses": {"min_ns": 0, "median_ns": 0, "max_ns": 0, "wall_ns": 0}}`,
		"pc not hex":  `{"pid": 1, "command": "x", "threads": [{"tid": 1, "name": "x", "state": "R", "complete": true, "stopped_ns": 0, "frames": [{"pc": "12", "offset": 0, "method": "regs"}]}], "pauses": {"min_ns": 0, "median_ns": 0, "max_ns": 0, "wall_ns": 0}}`,
		"extra field": `{"pid": 1, "command": "x", "threads": [], "pauses": {"min_ns": 0, "median_ns": 0, "max_ns": 0, "wall_ns": 0}, "surprise": 1}`,
		"negative ns": `{"pid": 1, "command": "x", "threads": [], "pauses": {"min_ns": -1, "median_ns": 0, "max_ns": 0, "wall_ns": 0}}`,
		"string tid":  `{"pid": 1, "command": "x", "threads": [{"tid": "1", "name": "x", "state": "R", "complete": true, "stopped_ns": 0, "frames": []}], "pauses": {"min_ns": 0, "median_ns": 0, "max_ns": 0, "wall_ns": 0}}`,
	} {
		if errs := validateDump(t, schema, []byte(bad)); len(errs) == 0 {
			t.Errorf("%s: the schema accepts %s", name, bad)
		}
	}
}
