package symbols

import (
	"debug/elf"
	"errors"
	"fmt"
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
	sec := f.SectionByType(elf.SHT_SYMTAB)
	if sec == nil {
		return dst, nil
	}
	var entSize int
	switch f.Class {
	case elf.ELFCLASS64:
		entSize = elf.Sym64Size
	case elf.ELFCLASS32:
		entSize = elf.Sym32Size
	default:
		return dst, fmt.Errorf("unknown ELF class %v", f.Class)
	}
	data, err := sec.Data()
	if err != nil {
		return dst, fmt.Errorf("cannot load symbol section: %w", err)
	}
	if len(data)%entSize != 0 {
		return dst, errors.New("length of symbol section is not a multiple of the symbol size")
	}
	if sec.Link == 0 || int(sec.Link) >= len(f.Sections) {
		return dst, fmt.Errorf("symbol section's string table link %d out of range", sec.Link)
	}
	strtab, err := f.Sections[sec.Link].Data()
	if err != nil {
		return dst, fmt.Errorf("cannot load string table section: %w", err)
	}
	order := f.ByteOrder
	for off := entSize; off+entSize <= len(data); off += entSize {
		e := data[off : off+entSize]
		var s elf.Symbol
		var name uint32
		if entSize == elf.Sym64Size {
			name = order.Uint32(e)
			s.Info, s.Other = e[4], e[5]
			s.Section = elf.SectionIndex(order.Uint16(e[6:]))
			s.Value, s.Size = order.Uint64(e[8:]), order.Uint64(e[16:])
		} else {
			name = order.Uint32(e)
			s.Value, s.Size = uint64(order.Uint32(e[4:])), uint64(order.Uint32(e[8:]))
			s.Info, s.Other = e[12], e[13]
			s.Section = elf.SectionIndex(order.Uint16(e[14:]))
		}
		c, ok := candidateOf(f, &s, noBits)
		if !ok {
			continue
		}
		if c.raw = cString(strtab, name); c.raw == "" {
			continue
		}
		dst = append(dst, c)
	}
	return dst, nil
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
