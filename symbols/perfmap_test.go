package symbols

import (
	"errors"
	"testing"
)

func TestParsePerfMap(t *testing.T) {
	data := []byte("7f0000001000 40 LazyCompile:~handler /srv/app.js:10\n" +
		"0x7f0000002000 0x20 jit_two\n" +
		"garbage\n" +
		"7f0000001000 40 LazyCompile:*handler /srv/app.js:10\n" + // recompiled in place: wins
		"7f0000001010 8 stub_inside\n" +
		"7f0000003000 0 empty\n" +
		"7f0000004000 10 being_writ") // no newline yet: left out
	m, err := ParsePerfMap(data)
	var pe *PerfMapError
	if !errors.As(err, &pe) || pe.Line != 3 {
		t.Fatalf("err %v, want a *PerfMapError for line 3", err)
	}
	if m.Len() != 4 {
		t.Fatalf("%d entries, want 4", m.Len())
	}
	for _, c := range []struct {
		addr uint64
		want string
	}{
		{0x7f0000000fff, ""},
		{0x7f0000001000, "LazyCompile:*handler /srv/app.js:10"},
		{0x7f0000001012, "stub_inside"},
		{0x7f0000001020, "LazyCompile:*handler /srv/app.js:10"},
		{0x7f0000001040, ""},
		{0x7f000000201f, "jit_two"},
		{0x7f0000003000, ""},
		{0x7f0000004000, ""},
	} {
		e, ok := m.Lookup(c.addr)
		if ok != (c.want != "") || e.Name != c.want {
			t.Errorf("Lookup(%#x) = %q, %v; want %q", c.addr, e.Name, ok, c.want)
		}
	}
}

// FuzzParsePerfMap: any bytes parse without a panic, every entry is a
// non-empty range that does not wrap, and Lookup returns only covering
// entries (it looks back over a bounded number of overlapping ones).
func FuzzParsePerfMap(f *testing.F) {
	f.Add([]byte("7f0000001000 40 a b c\n0x10 0x10 x\n"))
	f.Add([]byte("ffffffffffffffff 2 wrap\n1 ffffffffffffffff big\n"))
	f.Add([]byte("\n\r\n 1 2\nzz 1 q\n1 zz q\n1 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _ := ParsePerfMap(data)
		for _, r := range m.entries {
			e := m.entry(r)
			if e.Size == 0 || e.Start+e.Size < e.Start || len(e.Name) > maxPerfMapName {
				t.Fatalf("bad entry %+v", e)
			}
			for _, a := range []uint64{e.Start, e.Start + e.Size - 1} {
				got, ok := m.Lookup(a)
				if ok && a-got.Start >= got.Size {
					t.Fatalf("Lookup(%#x) = %+v, which does not cover it", a, got)
				}
			}
		}
	})
}
