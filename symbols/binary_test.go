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

	"stacktop/internal/fuzzbudget"
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
	for n := range len(b) {
		if _, err := UnmarshalTable(b[:n]); err == nil {
			t.Fatalf("a %d-byte prefix of %d decoded", n, len(b))
		}
	}
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
		{"parent not earlier", 24, func(b []byte) { le.PutUint32(rec(b, 1)[24:], 1) }},
		{"parent below -1", 24, func(b []byte) { le.PutUint32(rec(b, 1)[24:], 0xfffffffe) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spoilt := slices.Clone(b)
			tc.spoil(spoilt)
			_, err := UnmarshalTable(spoilt)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FormatError", err)
			}
			want := fmt.Sprintf("offset %d:", tableHeaderLen+tableRecordLen+tc.field)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it at %s", err, want)
			}
		})
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
		for s := range tab.All() {
			for _, a := range []uint64{s.Start, s.End() - 1, s.End()} {
				tab.Lookup(a) // must end: parents are earlier symbols
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
