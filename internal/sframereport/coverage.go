package sframereport

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"
	"strings"

	"codeberg.org/stacktop/stacktop/sframe"
)

// Coverage answers "which executable bytes have an FDE, and which functions
// have none". Addresses live in "spaces": an executable or shared object has
// one (its virtual addresses, space 0); in a relocatable object every section
// starts at 0, so each SHF_EXECINSTR section is its own space, keyed by its
// section index, and an FDE is put in the section its relocation points at.

// span is a half-open byte range [lo, hi) inside one space.
type span struct {
	space  int
	lo, hi uint64
}

// execSpans lists the executable bytes of f: PF_X PT_LOAD segments for linked
// files, SHF_EXECINSTR sections for relocatable objects.
func execSpans(f *elf.File) (spans []span, names []string, source string) {
	if f.Type == elf.ET_REL {
		for i, s := range f.Sections {
			if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
				spans = append(spans, span{space: i, lo: 0, hi: s.Size})
				names = append(names, s.Name)
			}
		}
		return spans, names, "SHF_EXECINSTR sections"
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Memsz > 0 {
			spans = append(spans, span{lo: p.Vaddr, hi: p.Vaddr + p.Memsz})
			names = append(names, fmt.Sprintf("PT_LOAD %#x", p.Vaddr))
		}
	}
	return spans, names, "PF_X PT_LOAD segments"
}

// mergeSpans sorts spans and merges overlapping or touching ones per space.
func mergeSpans(in []span) []span {
	s := append([]span(nil), in...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].space != s[j].space {
			return s[i].space < s[j].space
		}
		return s[i].lo < s[j].lo
	})
	var out []span
	for _, x := range s {
		if x.hi <= x.lo {
			continue
		}
		if n := len(out); n > 0 && out[n-1].space == x.space && x.lo <= out[n-1].hi {
			if x.hi > out[n-1].hi {
				out[n-1].hi = x.hi
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// overlap returns how many bytes of [lo, hi) in space lie inside merged.
func overlap(merged []span, space int, lo, hi uint64) uint64 {
	// First merged span in this space that ends after lo.
	i := sort.Search(len(merged), func(i int) bool {
		m := merged[i]
		return m.space > space || (m.space == space && m.hi > lo)
	})
	var n uint64
	for ; i < len(merged) && merged[i].space == space && merged[i].lo < hi; i++ {
		a, b := max(lo, merged[i].lo), min(hi, merged[i].hi)
		if b > a {
			n += b - a
		}
	}
	return n
}

// funcSym is one function symbol with a size.
type funcSym struct {
	name  string
	space int
	addr  uint64
	size  uint64
}

// funcSymbols collects STT_FUNC (and STT_GNU_IFUNC) symbols with a non-zero
// size from .symtab and .dynsym, one per start address (the .symtab name
// wins, then the larger size). Stripped files simply have fewer symbols.
func funcSymbols(f *elf.File) ([]funcSym, []string) {
	var warnings []string
	type key struct {
		space int
		addr  uint64
	}
	seen := map[key]int{}
	var out []funcSym
	add := func(syms []elf.Symbol, err error, table string) {
		if err != nil {
			if !errors.Is(err, elf.ErrNoSymbols) {
				warnings = append(warnings, fmt.Sprintf("%s: %v", table, err))
			}
			return
		}
		for _, s := range syms {
			t := elf.ST_TYPE(s.Info)
			if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || s.Size == 0 ||
				s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE {
				continue
			}
			space := 0
			if f.Type == elf.ET_REL {
				space = int(s.Section)
			}
			k := key{space, s.Value}
			if i, ok := seen[k]; ok {
				if s.Size > out[i].size {
					out[i].size = s.Size
				}
				continue
			}
			seen[k] = len(out)
			out = append(out, funcSym{name: s.Name, space: space, addr: s.Value, size: s.Size})
		}
	}
	syms, err := f.Symbols()
	add(syms, err, ".symtab")
	dyn, err := f.DynamicSymbols()
	add(dyn, err, ".dynsym")
	return out, warnings
}

// fdeEntrySize is the size of one entry of the FDE sub-section (V3: the
// function index entry).
func fdeEntrySize(version uint8) uint64 {
	switch version {
	case 1:
		return 17
	case 2:
		return 20
	}
	return 16
}

// relocatedFDEs maps FDE indexes of a relocatable object's .sframe to the
// section and offset of the function they describe, using the relocations
// of the start-address fields (.rela.sframe). FDEs without a usable
// relocation are absent from the map.
func relocatedFDEs(f *elf.File, sf *elf.Section, h sframe.Header) (map[int]span, error) {
	var idx int = -1
	for i, s := range f.Sections {
		if s == sf {
			idx = i
		}
	}
	if idx < 0 || f.Class != elf.ELFCLASS64 {
		return nil, nil
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("symbols for .sframe relocations: %w", err)
	}
	first := uint64(28) + uint64(h.AuxHeaderLen) + uint64(h.FDEOff)
	esz := fdeEntrySize(h.Version)
	out := map[int]span{}
	for _, rs := range f.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) != idx {
			continue
		}
		data, err := rs.Data()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rs.Name, err)
		}
		for off := 0; off+24 <= len(data); off += 24 {
			roff := f.ByteOrder.Uint64(data[off:])
			info := f.ByteOrder.Uint64(data[off+8:])
			addend := int64(f.ByteOrder.Uint64(data[off+16:]))
			if roff < first || (roff-first)%esz != 0 {
				continue // some other field
			}
			i := int((roff - first) / esz)
			symIdx := int(info >> 32)
			if symIdx < 1 || symIdx > len(syms) {
				return nil, fmt.Errorf("%s: relocation at %#x names symbol %d of %d", rs.Name, off, symIdx, len(syms))
			}
			s := syms[symIdx-1]
			if s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE {
				continue
			}
			// The assembler emits a PC-relative relocation against the
			// code section with the function's offset as addend, in every
			// version (before the PCREL flag the linker rewrote the
			// field), so the function is at S + A.
			target := int64(s.Value) + addend
			out[i] = span{space: int(s.Section), lo: uint64(target)}
		}
	}
	return out, nil
}

// sframeELFSection finds the .sframe section header and the address the
// decoder will have used: the PT_GNU_SFRAME segment's, else the section's.
func sframeELFSection(f *elf.File) (sec *elf.Section, info SectionInfo) {
	info.Name = ".sframe"
	for _, p := range f.Progs {
		if p.Type == ptGNUSFrame {
			info.Source = "PT_GNU_SFRAME"
			info.Vaddr = p.Vaddr
			info.Size = p.Filesz
			break
		}
	}
	for _, s := range f.Sections {
		if s.Name == ".sframe" || (s.Type == shtGNUSFrame && sec == nil) ||
			(info.Source != "" && s.Addr == info.Vaddr && s.Size > 0 && strings.HasPrefix(s.Name, ".sframe")) {
			sec = s
			if s.Name == ".sframe" {
				break
			}
		}
	}
	if sec != nil {
		info.Name = sec.Name
		if info.Source == "" {
			info.Source = "section"
			info.Vaddr = sec.Addr
			info.Size = sec.Size
		}
	}
	return sec, info
}

const (
	ptGNUSFrame  = elf.ProgType(0x6474e554)
	shtGNUSFrame = elf.SectionType(0x6ffffff4)
)

// computeCoverage fills a Coverage from the FDE ranges (already placed in
// spaces) and the ELF's executable bytes and function symbols.
func computeCoverage(f *elf.File, fdes []span, unplaced int, top int) (*Coverage, []string) {
	ex, names, source := execSpans(f)
	c := &Coverage{ExecSource: source, UnplacedFDEs: unplaced, ExecRanges: []ExecRange{}, Uncovered: []Uncovered{}}
	for i, s := range ex {
		c.ExecRanges = append(c.ExecRanges, ExecRange{Name: names[i], Start: s.lo, End: s.hi})
		c.ExecBytes += s.hi - s.lo
	}
	merged := mergeSpans(fdes)
	exMerged := mergeSpans(ex)
	for _, s := range exMerged {
		c.CoveredBytes += overlap(merged, s.space, s.lo, s.hi)
	}
	for _, m := range merged {
		c.FDEBytes += m.hi - m.lo
	}
	c.FDEBytesOutsideExec = c.FDEBytes - c.CoveredBytes
	if c.ExecBytes > 0 {
		c.Percent = 100 * float64(c.CoveredBytes) / float64(c.ExecBytes)
	}
	// A PF_X segment also holds headers, PLTs, read-only data or the
	// .sframe itself when the link does not separate code; the code
	// sections inside it give the sharper figure.
	if f.Type == elf.ET_REL {
		c.CodeBytes, c.CoveredCodeBytes, c.CodePercent = c.ExecBytes, c.CoveredBytes, c.Percent
	} else {
		var code []span
		for _, s := range f.Sections {
			if s.Flags&(elf.SHF_EXECINSTR|elf.SHF_ALLOC) == elf.SHF_EXECINSTR|elf.SHF_ALLOC && s.Type != elf.SHT_NOBITS && s.Size > 0 {
				code = append(code, span{lo: s.Addr, hi: s.Addr + s.Size})
			}
		}
		for _, s := range mergeSpans(code) {
			c.CodeBytes += s.hi - s.lo
			c.CoveredCodeBytes += overlap(merged, s.space, s.lo, s.hi)
		}
		if c.CodeBytes > 0 {
			c.CodePercent = 100 * float64(c.CoveredCodeBytes) / float64(c.CodeBytes)
		}
	}

	syms, warnings := funcSymbols(f)
	for _, s := range syms {
		if overlap(exMerged, s.space, s.addr, s.addr+s.size) == 0 {
			continue // not in executable bytes (or not in a space we track)
		}
		c.Functions++
		if overlap(merged, s.space, s.addr, s.addr+s.size) > 0 {
			c.FunctionsWithFDE++
			continue
		}
		c.FunctionsWithoutFDE++
		c.BytesWithoutFDE += s.size
		u := Uncovered{Name: s.name, Addr: s.addr, Size: s.size}
		if f.Type == elf.ET_REL && s.space < len(f.Sections) {
			u.Section = f.Sections[s.space].Name
		}
		c.Uncovered = append(c.Uncovered, u)
	}
	sort.SliceStable(c.Uncovered, func(i, j int) bool {
		a, b := c.Uncovered[i], c.Uncovered[j]
		if a.Size != b.Size {
			return a.Size > b.Size
		}
		return a.Addr < b.Addr
	})
	if top >= 0 && len(c.Uncovered) > top {
		c.Uncovered = c.Uncovered[:top]
	}
	return c, warnings
}
