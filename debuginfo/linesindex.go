package debuginfo

// Building a Lines: its index of compile units by PC range, from
// .debug_aranges (units then decoded lazily, one at a time) or from every
// unit of the whole DWARF.

import (
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"slices"
)

// NewLines indexes the compile units of f's DWARF (f may be a separate
// debug file). With .debug_aranges (GCC writes it) that table is the
// index, and each unit's bytes are read, decompressed and decoded at its
// first lookup, so a few lookups in libc cost a few of its 2,000 units.
// Without it every unit's header and PC ranges are read here, which needs
// all of .debug_info.
func NewLines(f *elf.File) (l *Lines, err error) {
	return NewLinesCached(f, nil)
}

// NewLinesCached is NewLines with the decompressed sections kept in c
// (nil: no cache) from one run to the next; SaveCache writes what this
// run added.
func NewLinesCached(f *elf.File, c *Cache) (l *Lines, err error) {
	if f.Section(".debug_info") == nil && f.Section(".zdebug_info") == nil {
		return nil, ErrNoDWARF
	}
	if f.Section(".zdebug_info") == nil {
		if l, err := newLazyLines(f, c); l != nil || err != nil {
			return l, err
		}
	}
	var d *dwarf.Data
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = &FormatError{".debug_info", -1, fmt.Errorf("debug/dwarf panicked: %v", p)}
			}
		}()
		d, err = loadDWARF(f)
	}()
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &FormatError{".debug_info", -1, err}
	}
	return NewLinesFromDWARF(d)
}

// newLazyLines indexes f's units from .debug_aranges. It returns nil, nil
// when f has no usable .debug_aranges, for NewLines to read every unit.
func newLazyLines(f *elf.File, c *Cache) (*Lines, error) {
	s := newLazySection(f, ".debug_aranges")
	if !s.present() {
		return nil, nil
	}
	buildID := ""
	if c != nil {
		buildID = objectBuildID(f)
		s.useCache(c, buildID)
	}
	b, err := s.all()
	if err != nil {
		return nil, err
	}
	units, err := parseAranges(b, f.ByteOrder)
	if err != nil || len(units) == 0 {
		// A table we cannot read is no index; the units still are.
		return nil, nil
	}
	l := &Lines{lazy: newLazyDWARF(f, c, buildID), aranges: s, units: units, cus: map[dwarf.Offset]*unitSlot{}, names: map[dwarf.Offset]string{}}
	l.sortUnits()
	return l, nil
}

// NewLinesFromDWARF indexes d's compile units by PC range.
func NewLinesFromDWARF(d *dwarf.Data) (l *Lines, err error) {
	l = &Lines{d: d, cus: map[dwarf.Offset]*unitSlot{}, names: map[dwarf.Offset]string{}}
	defer func() {
		if p := recover(); p != nil {
			l, err = nil, &FormatError{".debug_info", -1, fmt.Errorf("debug/dwarf panicked: %v", p)}
		}
	}()
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, &FormatError{".debug_info", -1, err}
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			ranges, err := d.Ranges(e)
			if err != nil {
				// One unit with bad ranges costs its lines, not the
				// whole object's.
				ranges = nil
			}
			for _, rg := range ranges {
				if rg[0] < rg[1] {
					l.units = append(l.units, unitRange{rg[0], rg[1], e.Offset})
				}
			}
		}
		r.SkipChildren()
	}
	l.sortUnits()
	return l, nil
}

func (l *Lines) sortUnits() {
	slices.SortFunc(l.units, func(a, b unitRange) int { return cmp.Compare(a.lo, b.lo) })
	l.maxEnd = make([]uint64, len(l.units))
	var m uint64
	for i, u := range l.units {
		m = max(m, u.hi)
		l.maxEnd[i] = m
	}
}
