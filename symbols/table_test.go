package symbols

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The test binaries and how they were built are in testdata/build.sh.
var testBinaries = []string{"cprog-lazy", "cprog-ibt", "cprog-stripped", "cxxprog"}

func loadTestTable(t testing.TB, name string) *Table {
	t.Helper()
	f, err := elf.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := Load(f)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return tab
}

// TestLookupMatchesBinutils checks every function readelf lists and every
// PLT entry objdump labels at its first byte, its middle, its last byte
// and one past its end, and that the table holds nothing else.
//
// Besides the committed binaries it checks the toolchain's own libc and
// libstdc++ when gcc can name them: big, real objects with IFUNCs, many
// aliases and hundreds of PLT entries.
func TestLookupMatchesBinutils(t *testing.T) {
	paths := map[string]string{}
	for _, bin := range testBinaries {
		paths[bin] = filepath.Join("testdata", bin)
	}
	for _, lib := range []string{"libc.so.6", "libstdc++.so.6"} {
		if testing.Short() {
			break // objdump -d of libc takes seconds
		}
		if p := toolchainLib(lib); p != "" {
			paths[lib] = p
		}
	}
	for bin, path := range paths {
		t.Run(bin, func(t *testing.T) {
			o := loadOracle(t, path)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := Load(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			funcs := o.functions()
			if len(funcs) == 0 {
				t.Fatal("oracle found no functions")
			}

			var starts []uint64
			for a := range funcs {
				starts = append(starts, a)
			}
			for a := range o.plt {
				if _, dup := funcs[a]; !dup {
					starts = append(starts, a)
				}
			}
			slices.Sort(starts)
			next := func(a uint64) (uint64, bool) {
				i, found := slices.BinarySearch(starts, a)
				if found {
					i++
				}
				if i < len(starts) {
					return starts[i], true
				}
				return 0, false
			}

			// checkExtent probes a symbol that must span [start, end).
			checkExtent := func(what string, start, end uint64) {
				t.Helper()
				probes := []uint64{start, start + (end-start)/2, end - 1}
				for _, p := range probes {
					sym, ok := tab.Lookup(p)
					if !ok || sym.Start != start {
						t.Errorf("%s: Lookup(%#x) = %+v, %v; want the symbol at %#x", what, p, sym, ok, start)
					}
				}
				sym, ok := tab.Lookup(end)
				if n, has := next(start); has && n == end {
					if !ok || sym.Start != end {
						t.Errorf("%s: Lookup(%#x) one past the end = %+v, %v; want the next symbol at %#x", what, end, sym, ok, end)
					}
				} else if ok && sym.Start == start {
					t.Errorf("%s: Lookup(%#x) one past the end still returns it", what, end)
				}
			}

			for addr, aliases := range funcs {
				sym, ok := tab.Lookup(addr)
				if !ok || sym.Start != addr {
					t.Errorf("Lookup(%#x) = %+v, %v; want one of %v", addr, sym, ok, aliasNames(aliases))
					continue
				}
				i := slices.IndexFunc(aliases, func(s oracleSym) bool { return s.name == sym.Raw })
				if i < 0 {
					t.Errorf("Lookup(%#x).Raw = %q; not among readelf's %v", addr, sym.Raw, aliasNames(aliases))
					continue
				}
				chosen := aliases[i]
				// Preference: a sized alias over size-0 ones, then the
				// strongest binding among those.
				anySized := slices.ContainsFunc(aliases, func(s oracleSym) bool { return s.size > 0 })
				if anySized && chosen.size == 0 {
					t.Errorf("%#x: chose size-0 %q over a sized alias in %v", addr, chosen.name, aliasNames(aliases))
				}
				for _, a := range aliases {
					if (a.size > 0) == (chosen.size > 0) && bindOrder[a.bind] < bindOrder[chosen.bind] {
						t.Errorf("%#x: chose %s %q over %s %q", addr, chosen.bind, chosen.name, a.bind, a.name)
					}
				}
				end := addr + chosen.size
				if chosen.size == 0 {
					end = chosen.sectionEnd
					if n, ok := next(addr); ok && n < end {
						end = n
					}
				}
				if sym.End() != end {
					t.Errorf("%q: End = %#x, want %#x (readelf size %d)", sym.Raw, sym.End(), end, chosen.size)
				}
				checkExtent(sym.Raw, addr, end)
			}

			for addr, name := range o.plt {
				sym, ok := tab.Lookup(addr)
				if !ok || sym.Start != addr || sym.Raw != name {
					t.Errorf("PLT: Lookup(%#x) = %+v, %v; want %q as objdump -d labels it", addr, sym, ok, name)
					continue
				}
				if n, has := next(addr); has && n < sym.End() {
					t.Errorf("PLT %q: End %#x overlaps the next entry at %#x", name, sym.End(), n)
				}
				checkExtent(name, addr, sym.End())
			}

			for sym := range tab.All() {
				if aliases, ok := funcs[sym.Start]; ok && slices.ContainsFunc(aliases, func(s oracleSym) bool { return s.name == sym.Raw }) {
					continue
				}
				if o.plt[sym.Start] == sym.Raw {
					continue
				}
				t.Errorf("table has %+v, which neither readelf nor objdump know", sym)
			}
		})
	}
}

// toolchainLib returns the absolute path of a library as gcc links it, or
// "" when there is no gcc or no such library.
func toolchainLib(name string) string {
	out, err := exec.Command("gcc", "-print-file-name="+name).Output()
	if err != nil {
		return ""
	}
	p := strings.TrimSpace(string(out))
	if !filepath.IsAbs(p) {
		return ""
	}
	if f, err := elf.Open(p); err == nil {
		f.Close()
		return p
	}
	return ""
}

func aliasNames(syms []oracleSym) []string {
	var out []string
	for _, s := range syms {
		out = append(out, s.bind+" "+s.name)
	}
	return out
}

// TestPLTEntries pins the cases the brief calls out: puts@plt at the
// address objdump shows, in the lazy .plt and in the IBT .plt.sec.
func TestPLTEntries(t *testing.T) {
	for _, tc := range []struct{ bin, section string }{
		{"cprog-lazy", ".plt"},
		{"cprog-ibt", ".plt.sec"},
		{"cprog-stripped", ".plt"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			o := loadOracle(t, filepath.Join("testdata", tc.bin))
			var addr uint64
			for a, n := range o.plt {
				if n == "puts@plt" {
					addr = a
				}
			}
			if addr == 0 {
				t.Fatal("objdump shows no puts@plt")
			}
			f, err := elf.Open(filepath.Join("testdata", tc.bin))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sec := f.Section(tc.section)
			if sec == nil || addr < sec.Addr || addr >= sec.Addr+sec.Size {
				t.Fatalf("puts@plt at %#x is not in %s", addr, tc.section)
			}
			tab := loadTestTable(t, tc.bin)
			sym, ok := tab.Lookup(addr + 5)
			if !ok || sym.Name != "puts@plt" || sym.Start != addr {
				t.Errorf("Lookup(puts@plt+5) = %+v, %v", sym, ok)
			}
		})
	}
}

// TestStrippedHasNoLocals: with .symtab gone, static functions are not
// named (the frame falls back to module+offset), exported ones still are.
func TestStrippedHasNoLocals(t *testing.T) {
	full, stripped := loadTestTable(t, "cprog-lazy"), loadTestTable(t, "cprog-stripped")
	names := func(tab *Table) map[string]bool {
		m := map[string]bool{}
		for s := range tab.All() {
			m[s.Raw] = true
		}
		return m
	}
	fn, sn := names(full), names(stripped)
	for _, n := range []string{"static_helper", "global_worker", "main", "puts@plt"} {
		if !fn[n] {
			t.Errorf("unstripped table lacks %q", n)
		}
	}
	if sn["static_helper"] || sn["local_worker_alias"] {
		t.Errorf("stripped table names a static function: %v", sn)
	}
	for _, n := range []string{"global_worker", "weak_hook", "main", "puts@plt"} {
		if !sn[n] {
			t.Errorf("stripped table lacks exported %q", n)
		}
	}
}

// TestDemangledNamesMatchCxxfilt compares every C++ name in cxxprog with
// c++filt's rendering.
func TestDemangledNamesMatchCxxfilt(t *testing.T) {
	needTool(t, "c++filt")
	tab := loadTestTable(t, "cxxprog")
	var raws []string
	for s := range tab.All() {
		if strings.HasSuffix(s.Raw, "@plt") {
			continue
		}
		raws = append(raws, s.Raw)
	}
	want := cxxfilt(t, raws)
	mangled := 0
	for i, raw := range raws {
		sym, ok := findRaw(tab, raw)
		if !ok {
			t.Fatalf("%q vanished", raw)
		}
		if sym.Name != want[i] {
			t.Errorf("%q: Name %q, c++filt %q", raw, sym.Name, want[i])
		}
		if strings.HasPrefix(raw, "_Z") {
			mangled++
		}
	}
	if mangled < 5 {
		t.Errorf("only %d mangled names in cxxprog; the test binary lost its C++", mangled)
	}
}

func findRaw(tab *Table, raw string) (Symbol, bool) {
	for s := range tab.All() {
		if s.Raw == raw {
			return s, true
		}
	}
	return Symbol{}, false
}

func TestPreceding(t *testing.T) {
	tab := &Table{}
	for _, s := range []Symbol{{Name: "a", Start: 0x100, Size: 0x10}, {Name: "b", Start: 0x200, Size: 0x10}} {
		tab.syms = append(tab.syms, s)
		tab.starts = append(tab.starts, s.Start)
	}
	for _, c := range []struct {
		vaddr uint64
		want  string
	}{{0x50, ""}, {0x100, "a"}, {0x150, "a"}, {0x1ff, "a"}, {0x200, "b"}, {0x9999, "b"}} {
		got, ok := tab.Preceding(c.vaddr)
		if ok != (c.want != "") || got.Name != c.want {
			t.Errorf("Preceding(%#x) = %q, %v; want %q", c.vaddr, got.Name, ok, c.want)
		}
	}
}
