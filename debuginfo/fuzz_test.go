package debuginfo

import (
	"debug/dwarf"
	"debug/elf"
	"testing"
)

// FuzzLines feeds mutated .debug_info/.debug_abbrev/.debug_line bytes
// (seeded from the C++ test program) through the unit index and lookups:
// errors are fine, panics are not.
func FuzzLines(f *testing.F) {
	bin := buildCXX(f)
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
	})
}
