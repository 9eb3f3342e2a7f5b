package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// encodedTables are the test programs' tables (C, C++ with mangled names,
// stripped), and libc's merged with its debug file where the machine has
// them.
func encodedTables(t testing.TB) map[string]*Table {
	tabs := map[string]*Table{}
	for _, name := range testBinaries {
		tabs[name] = loadTestTable(t, name)
	}
	if f, d := libcWithDebug(t); f != nil {
		if tab, err := LoadWithDebug(f, d); err == nil {
			tabs["libc"] = tab
		}
	}
	return tabs
}

// libcWithDebug opens the toolchain's C library and its separate debug
// file (d nil without one); f is nil without the library. Both are closed
// at the end of the test.
func libcWithDebug(t testing.TB) (f, d *elf.File) {
	out, err := exec.Command("gcc", "-print-file-name=libc.so.6").Output()
	if err != nil || !filepath.IsAbs(strings.TrimSpace(string(out))) {
		return nil, nil
	}
	if f, err = elf.Open(strings.TrimSpace(string(out))); err != nil {
		return nil, nil
	}
	t.Cleanup(func() { f.Close() })
	if id := buildID(f); len(id) > 2 {
		if d, err = elf.Open(filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")); err == nil {
			t.Cleanup(func() { d.Close() })
		} else {
			d = nil
		}
	}
	return f, d
}

// TestTableBinaryRoundTrip: a decoded table holds the same symbols and
// answers every Lookup and Preceding as the table encoded.
func TestTableBinaryRoundTrip(t *testing.T) {
	for name, tab := range encodedTables(t) {
		t.Run(name, func(t *testing.T) {
			b, err := tab.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalTable(b)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Collect(tab.All())
			if have := slices.Collect(got.All()); !slices.Equal(have, want) {
				t.Fatalf("decoded %d symbols, want %d (or they differ)", len(have), len(want))
			}
			if len(want) == 0 {
				t.Fatal("no symbols to compare")
			}
			for _, s := range want {
				for _, a := range []uint64{s.Start - 1, s.Start, s.Start + s.Size/2, s.End() - 1, s.End()} {
					gs, gok := got.Lookup(a)
					ws, wok := tab.Lookup(a)
					if gs != ws || gok != wok {
						t.Fatalf("Lookup(%#x) = %+v %v, want %+v %v", a, gs, gok, ws, wok)
					}
					gs, gok = got.Preceding(a)
					ws, wok = tab.Preceding(a)
					if gs != ws || gok != wok {
						t.Fatalf("Preceding(%#x) = %+v %v, want %+v %v", a, gs, gok, ws, wok)
					}
				}
			}
			again, err := got.AppendBinary(nil)
			if err != nil || !slices.Equal(again, b) {
				t.Fatalf("encoding the decoded table gives other bytes (%v)", err)
			}
		})
	}
}

// TestUnmarshalTableRejects: every broken rule is an error naming its
// offset; no prefix of a valid encoding decodes.
func TestUnmarshalTableRejects(t *testing.T) {
	tab := loadTestTable(t, "cxxprog")
	b, err := tab.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte) error { _, err := UnmarshalTable(b); return err }
	checkPrefixesRejected(t, b, decode)
	le := binary.LittleEndian
	rec := func(b []byte, i int) []byte { return b[tableHeaderLen+i*tableRecordLen:] }
	for _, tc := range []struct {
		name  string
		field int // offset of the broken field in record 1
		spoil func(b []byte)
	}{
		{"start not ascending", 0, func(b []byte) { le.PutUint64(rec(b, 1), le.Uint64(rec(b, 0))) }},
		{"size 0", 8, func(b []byte) { le.PutUint64(rec(b, 1)[8:], 0) }},
		{"size wraps", 8, func(b []byte) { le.PutUint64(rec(b, 1)[8:], ^uint64(0)) }},
		{"name past the strings", 16, func(b []byte) { le.PutUint32(rec(b, 1)[16:], 1<<31) }},
		{"empty name", 20, func(b []byte) { le.PutUint32(rec(b, 1)[20:], 0) }},
	} {
		checkRejected(t, tc.name, b, tc.spoil, tableHeaderLen+tableRecordLen+tc.field, decode)
	}
}

// BenchmarkUnmarshalTable decodes the table BenchmarkLoadWithDebug
// builds, as a run that finds it cached does.
func BenchmarkUnmarshalTable(b *testing.B) {
	f, d := libcWithDebug(b)
	if f == nil {
		b.Skip("no C library")
	}
	tab, err := LoadWithDebug(f, d)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := tab.AppendBinary(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := UnmarshalTable(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tab.Len()), "symbols")
}

// FuzzUnmarshalTable: arbitrary bytes decode to an error or to a table
// whose lookups end and whose encoding decodes to the same table.
func FuzzUnmarshalTable(f *testing.F) {
	fuzzbudget.Limit(f)
	for _, syms := range [][]tinySym{
		{{"main", 0x1000, 0x10, 0x12}, {"helper", 0x1010, 0x8, 0x02}},
		{{"_Z1fv", 0x1000, 0x40, 0x12}, {"inner", 0x1010, 0x8, 0x02}},
	} {
		tab, err := loadReaderAt(bytes.NewReader(tinyELF(syms)))
		if err != nil {
			f.Fatal(err)
		}
		b, _ := tab.AppendBinary(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := UnmarshalTable(data)
		if err != nil {
			if tab != nil {
				t.Fatal("error with a table")
			}
			return
		}
		all := slices.Collect(tab.All())
		for _, s := range all {
			for _, a := range []uint64{s.Start, s.End() - 1, s.End()} {
				// Lookup's answer is the innermost symbol holding a:
				// of those that do, the one that starts last.
				var want Symbol
				found := false
				for _, c := range all {
					if c.Contains(a) && (!found || c.Start > want.Start) {
						want, found = c, true
					}
				}
				if got, ok := tab.Lookup(a); ok != found || got != want {
					t.Fatalf("Lookup(%#x) = %+v %v, want %+v %v", a, got, ok, want, found)
				}
				tab.Preceding(a)
			}
		}
		b, err := tab.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := UnmarshalTable(b)
		if err != nil {
			t.Fatalf("re-encoded table does not decode: %v", err)
		}
		if !slices.Equal(slices.Collect(again.All()), slices.Collect(tab.All())) {
			t.Fatal("re-encoded table differs")
		}
	})
}

// TestFuncNamesRoundTrip: FuncNames answer every name of FuncValues' map
// with its value, before and after a round trip through the binary form,
// and no other name.
func TestFuncNamesRoundTrip(t *testing.T) {
	var files []*elf.File
	for _, name := range testBinaries {
		f, err := elf.Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	if f, d := libcWithDebug(t); f != nil {
		files = append(files, f, d)
	}
	values, err := FuncValues(files...)
	if err != nil || len(values) == 0 {
		t.Fatalf("FuncValues: %d names, %v", len(values), err)
	}
	names := NewFuncNames(values)
	b, err := names.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := UnmarshalFuncNames(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*FuncNames{names, decoded} {
		if f.Len() != len(values) {
			t.Fatalf("%d names, want %d", f.Len(), len(values))
		}
		for name, want := range values {
			if got, ok := f.Value(name); !ok || got != want {
				t.Fatalf("Value(%q) = %#x, %v, want %#x", name, got, ok, want)
			}
		}
		for _, absent := range []string{"", "no such function", "\xff"} {
			if _, ok := f.Value(absent); ok {
				t.Errorf("Value(%q) found", absent)
			}
		}
	}
	var none *FuncNames
	if _, ok := none.Value("main"); ok || none.Len() != 0 {
		t.Error("nil FuncNames found a name")
	}
}

// TestUnmarshalFuncNamesRejects: an empty name, names out of order or
// past the strings, and every prefix of a valid form are errors.
func TestUnmarshalFuncNamesRejects(t *testing.T) {
	b, err := NewFuncNames(map[string]uint64{"alpha": 1, "beta": 2, "gamma": 3}).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte) error { _, err := UnmarshalFuncNames(b); return err }
	checkPrefixesRejected(t, b, decode)
	le := binary.LittleEndian
	rec := func(b []byte, i int) []byte { return b[tableHeaderLen+i*funcNameRecordLen:] }
	for _, tc := range []struct {
		name  string
		field int
		spoil func(b []byte)
	}{
		{"empty", 12, func(b []byte) { le.PutUint32(rec(b, 1)[12:], 0) }},
		{"past the strings", 8, func(b []byte) { le.PutUint32(rec(b, 1)[8:], 1<<31) }},
		{"not ascending", 8, func(b []byte) { copy(rec(b, 1)[8:16], rec(b, 0)[8:16]) }},
	} {
		checkRejected(t, tc.name, b, tc.spoil, tableHeaderLen+funcNameRecordLen+tc.field, decode)
	}
}

// checkPrefixesRejected wants every proper prefix of the valid form b to
// fail to decode.
func checkPrefixesRejected(t *testing.T, b []byte, decode func([]byte) error) {
	t.Helper()
	for n := range len(b) {
		if decode(b[:n]) == nil {
			t.Fatalf("a %d-byte prefix of %d decoded", n, len(b))
		}
	}
}

// checkRejected decodes a copy of b that spoil changed and wants a
// *FormatError at offset at.
func checkRejected(t *testing.T, name string, b []byte, spoil func([]byte), at int, decode func([]byte) error) {
	t.Run(name, func(t *testing.T) {
		spoilt := slices.Clone(b)
		spoil(spoilt)
		err := decode(spoilt)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("err = %v, want a *FormatError", err)
		}
		if want := fmt.Sprintf("offset %d:", at); !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it at %s", err, want)
		}
	})
}

// FuzzUnmarshalFuncNames: arbitrary bytes decode to an error or to names
// that Value finds, each with its value.
func FuzzUnmarshalFuncNames(f *testing.F) {
	fuzzbudget.Limit(f)
	b, _ := NewFuncNames(map[string]uint64{"main": 0x1000, "_Z1fv": 0x2000}).AppendBinary(nil)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := UnmarshalFuncNames(data)
		if err != nil {
			if names != nil {
				t.Fatal("error with names")
			}
			return
		}
		for i, name := range names.names {
			if v, ok := names.Value(name); !ok || v != names.values[i] {
				t.Fatalf("Value(%q) = %#x, %v, want %#x", name, v, ok, names.values[i])
			}
		}
	})
}

// TestUnmarshalTableParents: decoding works out which symbol encloses
// which (the format stores no such index to trust): an address inside an
// outer function but past a nested label is the outer function's, after
// a round trip too. (A stored index that named no parent made Lookup miss
// the outer function.)
func TestUnmarshalTableParents(t *testing.T) {
	tab, err := loadReaderAt(bytes.NewReader(tinyELF([]tinySym{
		{"outer", 0x1000, 0x20, 0x12}, {"inner", 0x1008, 0x4, 0x02},
	})))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tab.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalTable(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr uint64
		want string
	}{{0x1004, "outer"}, {0x1008, "inner"}, {0x100b, "inner"}, {0x1010, "outer"}, {0x101f, "outer"}} {
		if s, ok := got.Lookup(tc.addr); !ok || s.Name != tc.want {
			t.Errorf("Lookup(%#x) = %q, %v; want %s", tc.addr, s.Name, ok, tc.want)
		}
	}
}
