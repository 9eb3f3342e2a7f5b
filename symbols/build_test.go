package symbols

import (
	"debug/elf"
	"sync"
	"testing"
)

// These tests drive build directly with candidates, for shapes the test
// binaries do not have: nesting, overflow, sections that end early.

func fn(raw string, value, size, limit uint64, bind elf.SymBind) candidate {
	return candidate{raw: raw, value: value, size: size, limit: limit, bind: bind, isFunc: true}
}

func TestBuildNestedSymbols(t *testing.T) {
	// outer [0x100,0x200) holds inner [0x150,0x160) and deep [0x154,0x158).
	tab := build([]candidate{
		fn("outer", 0x100, 0x100, 0x1000, elf.STB_GLOBAL),
		fn("inner", 0x150, 0x10, 0x1000, elf.STB_LOCAL),
		fn("deep", 0x154, 0x4, 0x1000, elf.STB_LOCAL),
		fn("after", 0x200, 0x10, 0x1000, elf.STB_GLOBAL),
	})
	for _, tc := range []struct {
		addr uint64
		want string
	}{
		{0xff, ""}, {0x100, "outer"}, {0x14f, "outer"}, {0x150, "inner"}, {0x153, "inner"},
		{0x154, "deep"}, {0x157, "deep"}, {0x158, "inner"}, {0x15f, "inner"},
		{0x160, "outer"}, {0x1ff, "outer"}, {0x200, "after"}, {0x20f, "after"}, {0x210, ""},
	} {
		sym, ok := tab.Lookup(tc.addr)
		if got := map[bool]string{true: sym.Name}[ok]; got != tc.want {
			t.Errorf("Lookup(%#x) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestBuildSizeZero(t *testing.T) {
	tab := build([]candidate{
		// size-0 extends to the next symbol...
		fn("a", 0x10, 0, 0x100, elf.STB_GLOBAL),
		fn("b", 0x20, 0x8, 0x100, elf.STB_GLOBAL),
		// ...but not past its section (which ends at 0x40)...
		fn("c", 0x30, 0, 0x40, elf.STB_GLOBAL),
		fn("d", 0x50, 0x4, 0x100, elf.STB_GLOBAL),
		// ...and a sized alias wins over a size-0 one at the same address.
		fn("e_nosize", 0x60, 0, 0x100, elf.STB_GLOBAL),
		fn("e_sized", 0x60, 0x2, 0x100, elf.STB_LOCAL),
		// A size-0 symbol with nowhere to grow is dropped.
		fn("f", 0x100, 0, 0x100, elf.STB_GLOBAL),
	})
	want := []Symbol{
		{Name: "a", Raw: "a", Start: 0x10, Size: 0x10},
		{Name: "b", Raw: "b", Start: 0x20, Size: 0x8},
		{Name: "c", Raw: "c", Start: 0x30, Size: 0x10},
		{Name: "d", Raw: "d", Start: 0x50, Size: 0x4},
		{Name: "e_sized", Raw: "e_sized", Start: 0x60, Size: 0x2},
	}
	var got []Symbol
	for s := range tab.All() {
		got = append(got, s)
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("symbol %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestBuildPreference(t *testing.T) {
	for _, tc := range []struct {
		cands []candidate
		want  string
	}{
		{[]candidate{fn("local", 1, 4, 9, elf.STB_LOCAL), fn("weak", 1, 4, 9, elf.STB_WEAK), fn("global", 1, 4, 9, elf.STB_GLOBAL)}, "global"},
		{[]candidate{fn("__x", 1, 4, 9, elf.STB_GLOBAL), fn("_x", 1, 4, 9, elf.STB_GLOBAL)}, "_x"},
		{[]candidate{fn("xyz", 1, 4, 9, elf.STB_GLOBAL), fn("xy", 1, 4, 9, elf.STB_GLOBAL)}, "xy"},
		{[]candidate{fn("b", 1, 4, 9, elf.STB_GLOBAL), fn("a", 1, 4, 9, elf.STB_GLOBAL)}, "a"},
		{[]candidate{{raw: "label", value: 1, size: 4, limit: 9, bind: elf.STB_GLOBAL}, fn("func", 1, 4, 9, elf.STB_LOCAL)}, "func"},
	} {
		// Same answer whatever the input order.
		for rot := range tc.cands {
			c := append(append([]candidate{}, tc.cands[rot:]...), tc.cands[:rot]...)
			sym, ok := build(c).Lookup(2)
			if !ok || sym.Raw != tc.want {
				t.Errorf("%v: got %q, want %q", c, sym.Raw, tc.want)
			}
		}
	}
}

func TestBuildTopOfAddressSpace(t *testing.T) {
	tab := build([]candidate{fn("top", ^uint64(0)-3, 100, ^uint64(0), elf.STB_GLOBAL)})
	if sym, ok := tab.Lookup(^uint64(0) - 1); !ok || sym.Raw != "top" {
		t.Errorf("Lookup near the top = %+v, %v", sym, ok)
	}
	if _, ok := tab.Lookup(0); ok {
		t.Error("a wrapped size must not cover address 0")
	}
}

func TestNilTable(t *testing.T) {
	var tab *Table
	if _, ok := tab.Lookup(1); ok || tab.Len() != 0 {
		t.Error("nil table must be empty")
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	tab := loadTestTable(t, "cxxprog")
	var sink Symbol
	allocs := testing.AllocsPerRun(100, func() {
		for a := uint64(0x1000); a < 0x1200; a += 7 {
			sink, _ = tab.Lookup(a)
		}
	})
	_ = sink
	if allocs != 0 {
		t.Errorf("Lookup allocates %v times per run", allocs)
	}
}

// TestConcurrentLookup races first uses of lazily demangled names; run
// with -race.
func TestConcurrentLookup(t *testing.T) {
	tab := loadTestTable(t, "cxxprog")
	var want []Symbol
	for s := range loadTestTable(t, "cxxprog").All() {
		want = append(want, s)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, w := range want {
				if got, ok := tab.Lookup(w.Start); !ok || got != w {
					t.Errorf("Lookup(%#x) = %+v, want %+v", w.Start, got, w)
				}
			}
		})
	}
	wg.Wait()
}
