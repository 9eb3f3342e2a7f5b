package sframe

// The public entry points. The bodies live in decode.go (Parse and the
// validation walk), lookup.go (Func, Rows, Lookup, FuncAt) and elf.go
// (FromELF); this file keeps the signatures the inspector and the unwinder
// are written against in one place.

import (
	"debug/elf"
	"errors"
	"fmt"
)

// ErrNoFunc is returned by Lookup when no FDE covers the PC (a gap, or an
// address outside the section's functions). It is not a format error: the
// unwinder falls back to another method.
var ErrNoFunc = errors.New("sframe: no function covers pc")

// ErrNoRow is returned by Lookup when an FDE covers the PC but none of its
// FREs does (the first FRE starts after the PC, a PCMASK offset beyond the
// last FRE, or an FDE without FREs such as a V3 signal trampoline). It wraps
// ErrNoFunc, so errors.Is(err, ErrNoFunc) holds for both: either way the
// section has no row for the PC. FuncAt still finds the function.
var ErrNoRow = fmt.Errorf("%w: no frame row entry covers pc", ErrNoFunc)

// ErrNoSFrame is returned by FromELF when the file has neither a
// PT_GNU_SFRAME segment nor a .sframe section.
var ErrNoSFrame = errors.New("sframe: no .sframe section")

// FormatError reports corrupt section bytes: what is wrong and the byte
// offset inside the section where it was found.
type FormatError struct {
	Off int64
	Msg string
}

func (e *FormatError) Error() string { return fmt.Sprintf("sframe: %s at offset %#x", e.Msg, e.Off) }

// Section is a decoded, validated .sframe section. It keeps the raw bytes and
// decodes entries on demand, so a lookup does not decode the whole table.
// A Section is immutable after Parse and safe for concurrent use.
type Section struct {
	hdr   Header
	data  []byte
	vaddr uint64
	layout
}

// Parse validates data as an .sframe section loaded at virtual address vaddr.
// Every FDE and every FRE is checked once here, so later calls cannot meet
// corrupt bytes. data is retained, not copied: the caller must not modify it.
func Parse(data []byte, vaddr uint64) (*Section, error) { return parse(data, vaddr) }

// FromELF finds the section through PT_GNU_SFRAME, falling back to the
// .sframe section header, and parses it.
func FromELF(f *elf.File) (*Section, error) { return fromELF(f) }

// Header returns the decoded section header.
func (s *Section) Header() Header { return s.hdr }

// Vaddr returns the virtual address the section was parsed at.
func (s *Section) Vaddr() uint64 { return s.vaddr }

// NumFuncs returns the number of FDEs.
func (s *Section) NumFuncs() int { return int(s.hdr.NumFDEs) }

// Func decodes FDE i (in table order, the "func idx" readelf prints).
func (s *Section) Func(i int) (Func, error) { return s.funcAt(i) }

// Rows decodes all FREs of f into normalised rows, in table order.
func (s *Section) Rows(f Func) ([]Row, error) { return s.rows(f) }

// Lookup returns the row that applies at pc (an address in the ELF's virtual
// address space). ErrNoFunc when no FDE covers pc, ErrNoRow when one does but
// has no row for it. It allocates nothing.
func (s *Section) Lookup(pc uint64) (r Row, err error) {
	err = s.lookup(pc, &r)
	return r, err
}

// FuncAt returns the FDE whose range [Start, Start+Size) holds pc, or
// ErrNoFunc.
func (s *Section) FuncAt(pc uint64) (Func, error) {
	k, ok := s.find(pc)
	if !ok {
		return Func{}, ErrNoFunc
	}
	return s.funcs[k], nil
}
