package debuginfo

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// FuzzLines feeds mutated .debug_info/.debug_abbrev/.debug_line bytes
// (seeded from a tiny program with one inlined call) through the unit index
// and lookups: errors are fine, panics are not.
func FuzzLines(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	bin := buildTiny(f)
	ef, err := elf.Open(bin)
	if err != nil {
		f.Fatal(err)
	}
	data := func(name string) []byte {
		s := ef.Section(name)
		if s == nil {
			return nil
		}
		b, _ := s.Data()
		return b
	}
	info, abbrev, line, str := data(".debug_info"), data(".debug_abbrev"), data(".debug_line"), data(".debug_str")
	ef.Close()
	f.Add(info, abbrev, line)
	f.Fuzz(func(t *testing.T, info, abbrev, line []byte) {
		d, err := dwarf.New(abbrev, nil, nil, info, line, nil, nil, str)
		if err != nil {
			return
		}
		l, err := NewLinesFromDWARF(d)
		if err != nil {
			return
		}
		for _, u := range l.units {
			l.Frames(u.lo, nil)
			l.Frames(u.lo+(u.hi-u.lo)/2, nil)
		}
		cs, err := NewCallSitesFromLines(l)
		if err != nil {
			return
		}
		for _, u := range l.units {
			for pc := u.lo; pc < u.hi && pc < u.lo+256; pc++ {
				if s, ok := cs.At(pc + 1); ok {
					cs.TailChain(s, nil, func(uint64, string) bool { return false })
				}
			}
			cs.TailCalls(u.lo)
		}
	})
}

// buildTiny compiles a program of one compilation unit without libc, with
// an inlined call: its DWARF sections are a few hundred bytes. Seeds from
// the C++ test program (kilobytes, and g++ -O2 in every fuzz worker) kept
// the fuzzer minimising, at a cost quadratic in the input's size, instead
// of fuzzing.
func buildTiny(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.c")
	err := os.WriteFile(src, []byte(`static inline int twice(int x) { return x * 2; }
int g;
__attribute__((noinline)) int leaf(int x) { return twice(x) + g; }
void _start(void) { g = leaf(g); for (;;) ; }
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tiny")
	if out, err := exec.Command("gcc", "-O2", "-g", "-nostdlib", "-static", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// FuzzLazyUnits feeds mutated .debug_aranges/.debug_info/.debug_abbrev/
// .debug_line bytes (seeded from a one-unit program) through the lazy
// path, in an ELF file made around them: the aranges index, unit headers,
// the padded unit images and the lookups, of lines and of call sites.
// Errors are fine; panics and reads out of range are not.
func FuzzLazyUnits(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	bin := buildTiny(f)
	ef, err := elf.Open(bin)
	if err != nil {
		f.Fatal(err)
	}
	data := func(name string) []byte {
		s := ef.Section(name)
		if s == nil {
			return nil
		}
		b, _ := s.Data()
		return b
	}
	aranges, info, abbrev, line, str := data(".debug_aranges"), data(".debug_info"), data(".debug_abbrev"), data(".debug_line"), data(".debug_str")
	ef.Close()
	f.Add(aranges, info, abbrev, line)
	f.Fuzz(func(t *testing.T, aranges, info, abbrev, line []byte) {
		img := elfWithSections(map[string][]byte{
			".debug_aranges": aranges, ".debug_info": info, ".debug_abbrev": abbrev,
			".debug_line": line, ".debug_str": str,
		})
		ef, err := elf.NewFile(bytes.NewReader(img))
		if err != nil {
			t.Fatalf("test ELF does not parse: %v", err)
		}
		l, err := NewLines(ef)
		if err != nil || l == nil {
			return
		}
		for _, u := range l.units {
			l.Frames(u.lo, nil)
			l.Frames(u.lo+(u.hi-u.lo)/2, nil)
		}
		cs, err := NewCallSitesFromLines(l)
		if err != nil {
			return
		}
		for _, u := range l.units {
			for pc := u.lo; pc < u.hi && pc < u.lo+256; pc++ {
				if s, ok := cs.At(pc + 1); ok {
					cs.TailChain(s, nil, func(uint64, string) bool { return false })
				}
			}
			cs.TailCalls(u.lo)
		}
	})
}

// elfWithSections makes a little-endian ELF64 relocatable file that holds
// the given sections (and a section name table), nothing else.
func elfWithSections(secs map[string][]byte) []byte {
	names := slices.Sorted(maps.Keys(secs))
	shstr := []byte{0}
	nameOff := map[string]uint32{}
	for _, n := range append(names, ".shstrtab") {
		nameOff[n] = uint32(len(shstr))
		shstr = append(append(shstr, n...), 0)
	}
	le := binary.LittleEndian
	body := []byte{}
	offs := map[string]uint64{}
	const ehsize = 64
	for _, n := range names {
		offs[n] = uint64(ehsize + len(body))
		body = append(body, secs[n]...)
	}
	offs[".shstrtab"] = uint64(ehsize + len(body))
	body = append(body, shstr...)
	for len(body)%8 != 0 {
		body = append(body, 0)
	}
	shoff := uint64(ehsize + len(body))
	out := make([]byte, ehsize)
	copy(out, "\x7fELF")
	out[4], out[5], out[6] = 2, 1, 1 // ELFCLASS64, little-endian, EV_CURRENT
	le.PutUint16(out[16:], uint16(elf.ET_REL))
	le.PutUint16(out[18:], uint16(elf.EM_X86_64))
	le.PutUint32(out[20:], 1)
	le.PutUint64(out[40:], shoff)
	le.PutUint16(out[52:], ehsize)
	le.PutUint16(out[58:], 64)                   // shentsize
	le.PutUint16(out[60:], uint16(len(names)+2)) // shnum: null, sections, shstrtab
	le.PutUint16(out[62:], uint16(len(names)+1)) // shstrndx
	out = append(out, body...)
	sh := func(name string, typ elf.SectionType, off, size uint64) {
		var b [64]byte
		le.PutUint32(b[0:], nameOff[name])
		le.PutUint32(b[4:], uint32(typ))
		le.PutUint64(b[24:], off)
		le.PutUint64(b[32:], size)
		le.PutUint64(b[48:], 1)
		out = append(out, b[:]...)
	}
	out = append(out, make([]byte, 64)...) // the null section
	for _, n := range names {
		sh(n, elf.SHT_PROGBITS, offs[n], uint64(len(secs[n])))
	}
	sh(".shstrtab", elf.SHT_STRTAB, offs[".shstrtab"], uint64(len(shstr)))
	return out
}
