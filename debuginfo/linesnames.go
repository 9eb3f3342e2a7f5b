package debuginfo

// Naming a function scope's DIE while its unit is decoded: linkage name
// (demangled) or DW_AT_name, through abstract origins and specifications.

import (
	"debug/dwarf"

	"codeberg.org/stacktop/stacktop/symbols"
)

// name returns the display name of the function a scope DIE stands for:
// the demangled linkage name if it or its abstract origin or
// specification has one, else the first DW_AT_name found, as addr2line -C
// prints it. dataAt gives the dwarf.Data that holds a DIE and the offset
// of its unit's entry (for qualify.go). Called with
// l.decodeMu held, while a unit is decoded.
func (l *Lines) name(off dwarf.Offset, dataAt func(dwarf.Offset) (*dwarf.Data, dwarf.Offset)) string {
	if n, ok := l.names[off]; ok {
		return n
	}
	n := l.resolveName(off, dataAt)
	l.names[off] = n
	return n
}

func (l *Lines) resolveName(off dwarf.Offset, dataAt func(dwarf.Offset) (*dwarf.Data, dwarf.Offset)) (name string) {
	defer func() {
		if recover() != nil {
			name = ""
		}
	}()
	plain, plainOff := "", dwarf.Offset(0)
	var plainData *dwarf.Data
	var plainCU dwarf.Offset
	// Origins and specifications chain at most a few deep; the bound
	// stops a reference cycle in corrupt input.
	for hop := 0; hop < 8; hop++ {
		d, cu := dataAt(off)
		if d == nil {
			break
		}
		r := d.Reader()
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		for _, a := range []dwarf.Attr{dwarf.AttrLinkageName, mipsLinkageName} {
			if s, ok := e.Val(a).(string); ok && s != "" {
				return symbols.Demangle(s)
			}
		}
		if s, ok := e.Val(dwarf.AttrName).(string); ok && plain == "" {
			plain, plainOff, plainData, plainCU = s, e.Offset, d, cu
		}
		next, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			next, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok {
			break
		}
		off = next
	}
	return l.qualify(plainData, plainCU, plainOff, plain) // qualify.go: C++ namespaces and classes
}

// mipsLinkageName is DW_AT_MIPS_linkage_name, which older GCCs and some
// compilers still emit instead of DW_AT_linkage_name.
const mipsLinkageName = dwarf.Attr(0x2007)
