package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"maps"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// FuzzLoad feeds arbitrary bytes through elf.NewFile, Load and Lookup.
// Load may reject the input, but must not panic, and what it accepts must
// keep the table's invariants.
func FuzzLoad(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	// Seeds of a few hundred bytes, built here, not the 16 KB test
	// programs: the fuzzer minimises every input that finds new code, at
	// a cost quadratic in its size, and the test programs kept it
	// minimising for seconds instead of fuzzing. TestLoad* cover those.
	for _, syms := range [][]tinySym{
		{{"main", 0x1000, 0x10, 0x12}, {"helper", 0x1010, 0x8, 0x02}},
		{{"f", 0x1000, 0, 0x12}, {"f_alias", 0x1000, 0x10, 0x22}, {"ifunc", 0x1008, 4, 0x1a}, {"data", 0x1000, 8, 0x11}},
	} {
		b := tinyELF(syms)
		f.Add(b)
		f.Add(b[:len(b)/2]) // section headers cut off
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := loadReaderAt(bytes.NewReader(data))
		if err != nil {
			if tab != nil {
				t.Fatal("error with a table")
			}
			return
		}
		var prev *Symbol
		for i := range tab.syms {
			s := &tab.syms[i]
			if s.Size == 0 {
				t.Fatalf("symbol %q with size 0", s.Raw)
			}
			if prev != nil && prev.Start >= s.Start {
				t.Fatalf("symbols out of order: %#x then %#x", prev.Start, s.Start)
			}
			prev = s
			for _, a := range []uint64{s.Start, s.Start + s.Size/2, s.Start + s.Size - 1} {
				got, ok := tab.Lookup(a)
				if !ok || !got.Contains(a) {
					t.Fatalf("Lookup(%#x) = %+v, %v inside %+v", a, got, ok, *s)
				}
				if got.Name == "" && s.Name != "" {
					t.Fatalf("empty name for %+v", got)
				}
			}
			if got, ok := tab.Lookup(s.Start); !ok || got.Start != s.Start {
				t.Fatalf("Lookup(start %#x) = %+v, %v", s.Start, got, ok)
			}
		}
		tab.Lookup(0)
		tab.Lookup(^uint64(0))
	})
}

// tinySym is one .symtab entry of tinyELF: name, value, size and st_info
// (binding<<4 | type).
type tinySym struct {
	name        string
	value, size uint64
	info        byte
}

// tinyELF builds a little-endian x86-64 executable of a few hundred bytes:
// a 32-byte .text at 0x1000 and a .symtab holding syms.
func tinyELF(syms []tinySym) []byte {
	le := binary.LittleEndian
	shstr := []byte("\x00.text\x00.symtab\x00.strtab\x00.shstrtab\x00")
	strtab := []byte{0}
	symtab := make([]byte, 24) // the null symbol
	for _, sym := range syms {
		e := make([]byte, 24)
		le.PutUint32(e, uint32(len(strtab)))
		strtab = append(append(strtab, sym.name...), 0)
		e[4] = sym.info
		le.PutUint16(e[6:], 1) // .text
		le.PutUint64(e[8:], sym.value)
		le.PutUint64(e[16:], sym.size)
		symtab = append(symtab, e...)
	}
	text := make([]byte, 32)
	var body []byte
	place := func(b []byte) uint64 { off := uint64(64 + len(body)); body = append(body, b...); return off }
	textOff, symOff, strOff, shstrOff := place(text), place(symtab), place(strtab), place(shstr)
	shoff := uint64(64 + len(body))
	sh := func(name, typ uint32, flags, addr, off, size uint64, link, info uint32, align, entsize uint64) []byte {
		b := make([]byte, 64)
		le.PutUint32(b, name)
		le.PutUint32(b[4:], typ)
		le.PutUint64(b[8:], flags)
		le.PutUint64(b[16:], addr)
		le.PutUint64(b[24:], off)
		le.PutUint64(b[32:], size)
		le.PutUint32(b[40:], link)
		le.PutUint32(b[44:], info)
		le.PutUint64(b[48:], align)
		le.PutUint64(b[56:], entsize)
		return b
	}
	shdrs := append(make([]byte, 64),
		sh(1, uint32(elf.SHT_PROGBITS), uint64(elf.SHF_ALLOC|elf.SHF_EXECINSTR), 0x1000, textOff, uint64(len(text)), 0, 0, 16, 0)...)
	shdrs = append(shdrs, sh(7, uint32(elf.SHT_SYMTAB), 0, 0, symOff, uint64(len(symtab)), 3, 1, 8, 24)...)
	shdrs = append(shdrs, sh(15, uint32(elf.SHT_STRTAB), 0, 0, strOff, uint64(len(strtab)), 0, 0, 1, 0)...)
	shdrs = append(shdrs, sh(23, uint32(elf.SHT_STRTAB), 0, 0, shstrOff, uint64(len(shstr)), 0, 0, 1, 0)...)

	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1 // ELFCLASS64, little-endian, version 1
	le.PutUint16(h[16:], uint16(elf.ET_EXEC))
	le.PutUint16(h[18:], uint16(elf.EM_X86_64))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[24:], 0x1000) // entry
	le.PutUint64(h[40:], shoff)
	le.PutUint16(h[52:], 64) // ehsize
	le.PutUint16(h[58:], 64) // shentsize
	le.PutUint16(h[60:], 5)  // shnum
	le.PutUint16(h[62:], 4)  // shstrndx
	return append(append(h, body...), shdrs...)
}

// FuzzFuncValues feeds arbitrary bytes through elf.NewFile and
// FuncValues: no panic, and on input debug/elf reads without error the
// names and values it gives.
func FuzzFuncValues(f *testing.F) {
	fuzzbudget.Limit(f)
	for _, syms := range [][]tinySym{
		{{"main", 0x1000, 0x10, 0x12}, {"helper", 0x1010, 0x8, 0x02}},
		{{"f", 0x1000, 0, 0x12}, {"f", 0x1008, 0x10, 0x22}, {"ifunc", 0x1008, 4, 0x1a}, {"zero", 0, 8, 0x12}},
	} {
		b := tinyELF(syms)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ef *elf.File
		func() {
			defer func() { recover() }()
			ef, _ = elf.NewFile(bytes.NewReader(data))
		}()
		if ef == nil {
			return
		}
		got, err := FuncValues(ef)
		if err != nil {
			return
		}
		var want map[string]uint64
		ok := func() (ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			_, errS := ef.Symbols()
			_, errD := ef.DynamicSymbols()
			if (errS != nil && !errors.Is(errS, elf.ErrNoSymbols)) || (errD != nil && !errors.Is(errD, elf.ErrNoSymbols)) {
				return false
			}
			want = funcValuesOf(ef)
			return true
		}()
		if ok && !maps.Equal(got, want) {
			t.Fatalf("FuncValues = %v, debug/elf gives %v", got, want)
		}
	})
}
