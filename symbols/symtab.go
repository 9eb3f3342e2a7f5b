package symbols

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// appendSymtab is appendCandidates over f's .symtab, read straight from
// the section: debug/elf's Symbols makes a Symbol and a string of every
// entry (libc's debug file: 10,000, most of them data, labels and locals
// that are dropped at once), which was a quarter of the CPU of a one-
// thread dump. Here an entry is decoded in place and only the kept ones
// get a name, which shares the string table's bytes (kept alive by it).
// Like f.Symbols, the first (null) entry is skipped and a name offset out
// of range gives "" (dropped). No .symtab adds nothing.
func appendSymtab(dst []candidate, f *elf.File, noBits bool) ([]candidate, error) {
	tab, err := readSymbolSection(f, elf.SHT_SYMTAB)
	if err != nil || tab.n == 0 {
		return dst, err
	}
	// One allocation of the most the table can add, not a doubling
	// append: the garbage of the doubling was libc's largest allocation.
	dst = slices.Grow(dst, tab.n)
	for i := 1; i < tab.n; i++ {
		s, name := tab.entry(i)
		c, ok := candidateOf(f, &s, noBits)
		if !ok {
			continue
		}
		if c.raw = cString(tab.strtab, name); c.raw == "" {
			continue
		}
		dst = append(dst, c)
	}
	return dst, nil
}

// FuncValues maps the name of every STT_FUNC symbol with a non-zero
// value in files (nil entries skipped) to that value, the first one found
// when a name repeats: each file's .dynsym, then its .symtab, files in
// order. Tail-call frames use it to find a callee that DWARF names only
// by a declaration. Like appendSymtab it decodes entries in place, and
// the names share the string tables' bytes. A missing section adds
// nothing; a corrupt one adds nothing either, and the first is returned
// as a *FormatError naming it, with the values of the others.
func FuncValues(files ...*elf.File) (values map[string]uint64, err error) {
	stage := "ELF sections"
	defer func() {
		if p := recover(); p != nil {
			values, err = nil, &FormatError{Section: stage, Err: fmt.Errorf("debug/elf panicked: %v", p)}
		}
	}()
	var tabs []symbolSection
	n := 0
	for _, f := range files {
		if f == nil {
			continue
		}
		for _, typ := range []elf.SectionType{elf.SHT_DYNSYM, elf.SHT_SYMTAB} {
			stage = ".dynsym"
			if typ == elf.SHT_SYMTAB {
				stage = ".symtab"
			}
			tab, terr := readSymbolSection(f, typ)
			if terr != nil {
				if err == nil {
					err = &FormatError{Section: stage, Err: terr}
				}
				continue
			}
			tabs = append(tabs, tab)
			n += tab.n
		}
	}
	values = make(map[string]uint64, n/2)
	for _, tab := range tabs {
		for i := 1; i < tab.n; i++ {
			s, name := tab.entry(i)
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
				continue
			}
			raw := cString(tab.strtab, name)
			if raw == "" {
				continue
			}
			if _, dup := values[raw]; !dup {
				values[raw] = s.Value
			}
		}
	}
	return values, err
}

// symbolSection is a symbol table's raw entries and its string table.
type symbolSection struct {
	data, strtab []byte
	entSize      int
	n            int // entries, the null entry 0 included
	order        binary.ByteOrder
	class64      bool
}

// readSymbolSection reads f's section of type typ (SHT_SYMTAB or
// SHT_DYNSYM) and its linked string table; none is an empty table.
func readSymbolSection(f *elf.File, typ elf.SectionType) (symbolSection, error) {
	sec := f.SectionByType(typ)
	if sec == nil {
		return symbolSection{}, nil
	}
	tab := symbolSection{order: f.ByteOrder}
	switch f.Class {
	case elf.ELFCLASS64:
		tab.entSize, tab.class64 = elf.Sym64Size, true
	case elf.ELFCLASS32:
		tab.entSize = elf.Sym32Size
	default:
		return symbolSection{}, fmt.Errorf("unknown ELF class %v", f.Class)
	}
	data, err := sec.Data()
	if err != nil {
		return symbolSection{}, fmt.Errorf("cannot load symbol section: %w", err)
	}
	if len(data)%tab.entSize != 0 {
		return symbolSection{}, errors.New("length of symbol section is not a multiple of the symbol size")
	}
	if sec.Link == 0 || int(sec.Link) >= len(f.Sections) {
		return symbolSection{}, fmt.Errorf("symbol section's string table link %d out of range", sec.Link)
	}
	strtab, err := f.Sections[sec.Link].Data()
	if err != nil {
		return symbolSection{}, fmt.Errorf("cannot load string table section: %w", err)
	}
	tab.data, tab.strtab, tab.n = data, strtab, len(data)/tab.entSize
	return tab, nil
}

// entry decodes entry i (0 < i < t.n) and returns it with its name's
// offset in the string table.
func (t *symbolSection) entry(i int) (s elf.Symbol, name uint32) {
	e := t.data[i*t.entSize : (i+1)*t.entSize]
	name = t.order.Uint32(e)
	if t.class64 {
		s.Info, s.Other = e[4], e[5]
		s.Section = elf.SectionIndex(t.order.Uint16(e[6:]))
		s.Value, s.Size = t.order.Uint64(e[8:]), t.order.Uint64(e[16:])
	} else {
		s.Value, s.Size = uint64(t.order.Uint32(e[4:])), uint64(t.order.Uint32(e[8:]))
		s.Info, s.Other = e[12], e[13]
		s.Section = elf.SectionIndex(t.order.Uint16(e[14:]))
	}
	return s, name
}

// cString is the NUL-terminated string at off in tab, sharing tab's
// bytes; "" when off is out of range or the string is not terminated.
func cString(tab []byte, off uint32) string {
	if uint64(off) >= uint64(len(tab)) {
		return ""
	}
	rest := tab[off:]
	for i, b := range rest {
		if b == 0 {
			if i == 0 {
				return ""
			}
			return unsafe.String(&rest[0], i)
		}
	}
	return ""
}
