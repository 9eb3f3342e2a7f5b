package debuginfo

import (
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
)

// ErrNoPCLNTab is returned by NewGoTable for objects that are not Go
// programs.
var ErrNoPCLNTab = errors.New("debuginfo: no .gopclntab section")

// GoTable names PCs of a Go program from its .gopclntab, which survives
// stripping (-ldflags=-s -w) because the Go runtime needs it.
type GoTable struct {
	t *gosym.Table
}

// NewGoTable reads f's .gopclntab.
func NewGoTable(f *elf.File) (g *GoTable, err error) {
	sec := f.Section(".gopclntab")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, ErrNoPCLNTab
	}
	data, err := sectionData(sec)
	if err != nil {
		return nil, &FormatError{".gopclntab", -1, err}
	}
	var text uint64
	if t := f.Section(".text"); t != nil {
		text = t.Addr
	}
	var symtab []byte
	if s := f.Section(".gosymtab"); s != nil && s.Type != elf.SHT_NOBITS {
		if symtab, err = sectionData(s); err != nil {
			return nil, &FormatError{".gosymtab", -1, err}
		}
	}
	defer func() {
		if p := recover(); p != nil {
			g, err = nil, &FormatError{".gopclntab", -1, fmt.Errorf("debug/gosym panicked: %v", p)}
		}
	}()
	t, err := gosym.NewTable(symtab, gosym.NewLineTable(data, text))
	if err != nil {
		return nil, &FormatError{".gopclntab", -1, err}
	}
	return &GoTable{t: t}, nil
}

// Frame returns the function containing pc and the file:line pc belongs
// to. In a function with inlined calls the line is the innermost call's
// (the pclntab records positions after inlining) while the function is the
// outer one, as go tool addr2line prints them.
func (g *GoTable) Frame(pc uint64) (f Frame, ok bool) {
	defer func() {
		if recover() != nil {
			f, ok = Frame{}, false
		}
	}()
	file, line, fn := g.t.PCToLine(pc)
	if fn == nil {
		return Frame{}, false
	}
	return Frame{Function: fn.Name, File: file, Line: line}, true
}

// Func returns the name and entry address of the function containing pc.
func (g *GoTable) Func(pc uint64) (name string, entry uint64, ok bool) {
	fn := g.t.PCToFunc(pc)
	if fn == nil {
		return "", 0, false
	}
	return fn.Name, fn.Entry, true
}
