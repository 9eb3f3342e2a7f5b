package sframe

// Contract placeholders: the decoder replaces these bodies. The signatures
// are what the inspector and the unwinder are written against.

import (
	"debug/elf"
	"errors"
	"fmt"
)

// ErrNoFunc is returned by Lookup when no FDE covers the PC (a gap, or an
// address outside the section's functions). It is not a format error: the
// unwinder falls back to another method.
var ErrNoFunc = errors.New("sframe: no function covers pc")

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
}

// Parse validates data as an .sframe section loaded at virtual address vaddr.
func Parse(data []byte, vaddr uint64) (*Section, error) { panic("TODO") }

// FromELF finds the section through PT_GNU_SFRAME, falling back to the
// .sframe section header, and parses it.
func FromELF(f *elf.File) (*Section, error) { panic("TODO") }

func (s *Section) Header() Header                 { return s.hdr }
func (s *Section) Vaddr() uint64                  { return s.vaddr }
func (s *Section) NumFuncs() int                  { panic("TODO") }
func (s *Section) Func(i int) (Func, error)       { panic("TODO") }
func (s *Section) Rows(f Func) ([]Row, error)     { panic("TODO") }
func (s *Section) Lookup(pc uint64) (Row, error)  { panic("TODO") }
func (s *Section) FuncAt(pc uint64) (Func, error) { panic("TODO") }
