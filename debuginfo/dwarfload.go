package debuginfo

// Loading an object's DWARF sections, decompressed in parallel, without
// the sections the readers here never use.

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"sync"
)

// loadDWARF is f.DWARF() without what lines and inline frames never read
// (.debug_loclists, .debug_types), with the sections decompressed in
// parallel: decompression is nearly all of the cost (libc's debug file:
// about 0.2 s through f.DWARF()). Old GNU .zdebug_* sections go through
// f.DWARF(), which knows their framing.
func loadDWARF(f *elf.File) (*dwarf.Data, error) {
	return loadDWARFSections(f, true)
}

// LoadDWARFTypes is f's DWARF for reading its entries only (types, their
// members), without the line tables and ranges: what a reader of a Go
// program's runtime types needs (internal/gort), for a fraction of the
// decompression f.DWARF() does.
func LoadDWARFTypes(f *elf.File) (*dwarf.Data, error) {
	if f.Section(".debug_info") == nil && f.Section(".zdebug_info") == nil {
		return nil, errors.New("no .debug_info")
	}
	return loadDWARFSections(f, false)
}

func loadDWARFSections(f *elf.File, lines bool) (*dwarf.Data, error) {
	if f.Section(".zdebug_info") != nil {
		return f.DWARF()
	}
	names := []string{".debug_abbrev", ".debug_info", ".debug_str", ".debug_line", ".debug_ranges",
		".debug_line_str", ".debug_str_offsets", ".debug_addr", ".debug_rnglists"}
	data := make([][]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		sec := f.Section(name)
		if sec == nil || sec.Type == elf.SHT_NOBITS {
			continue
		}
		if !lines && (name == ".debug_line" || name == ".debug_ranges" || name == ".debug_rnglists") {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data[i], errs[i] = sec.Data()
			if errs[i] != nil {
				errs[i] = &FormatError{name, -1, errs[i]}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d, err := dwarf.New(data[0], nil, nil, data[1], data[3], nil, data[4], data[2])
	if err != nil {
		return nil, err
	}
	for i := 5; i < len(names); i++ {
		if data[i] != nil {
			if err := d.AddSection(names[i], data[i]); err != nil {
				return nil, &FormatError{names[i], -1, err}
			}
		}
	}
	return d, nil
}
