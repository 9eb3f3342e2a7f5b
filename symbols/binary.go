package symbols

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
)

// The binary form of a Table, for a cache that keeps it between runs
// (debuginfo.Cache): building libc's table from its symbol tables and its
// debug file's costs about 4 ms of CPU on every run, decoding this form a
// tenth of that. Little-endian:
//
//	count   uint32            symbols
//	strings uint32            bytes of names
//	count records of 24 bytes: start, size uint64; name offset, name
//	                           length uint32
//	strings bytes             the raw names, back to back
//
// The records are the Table's as built, ascending strictly by start;
// UnmarshalTable checks that, and works out each symbol's enclosing one
// itself (as build does) rather than trust a stored index: a Table it
// returns answers Lookup as one built from the same symbols does, and bad
// input is an error, never a panic or a wrong enclosing symbol.
// BuildVersion names the rules that make a Table and FuncNames from an
// object's symbols (which kinds are kept, which alias wins, how size-0
// symbols extend, PLT names, FuncValues' filter). A cache of their
// results keys on it, so that it does not outlive a change of them: bump
// it with any such change.
const BuildVersion = 1

const (
	tableHeaderLen = 8
	tableRecordLen = 24
)

// AppendBinary appends t's binary form to b.
func (t *Table) AppendBinary(b []byte) ([]byte, error) {
	le := binary.LittleEndian
	strs := 0
	for i := range t.syms {
		strs += len(t.syms[i].Raw)
	}
	if uint64(len(t.syms)) > 1<<31 || uint64(strs) > 1<<32-1 {
		return b, fmt.Errorf("symbols: table too large to encode (%d symbols, %d bytes of names)", len(t.syms), strs)
	}
	b = le.AppendUint32(b, uint32(len(t.syms)))
	b = le.AppendUint32(b, uint32(strs))
	off := 0
	for i := range t.syms {
		s := &t.syms[i]
		b = le.AppendUint64(b, s.Start)
		b = le.AppendUint64(b, s.Size)
		b = le.AppendUint32(b, uint32(off))
		b = le.AppendUint32(b, uint32(len(s.Raw)))
		off += len(s.Raw)
	}
	for i := range t.syms {
		b = append(b, t.syms[i].Raw...)
	}
	return b, nil
}

// UnmarshalTable decodes a Table from its binary form (AppendBinary). An
// error is a *FormatError that says which record, at which offset, broke
// which rule.
func UnmarshalTable(b []byte) (*Table, error) {
	le := binary.LittleEndian
	bad := func(off int, format string, args ...any) (*Table, error) {
		return nil, &FormatError{Section: "encoded table", Err: fmt.Errorf("offset %d: "+format, append([]any{off}, args...)...)}
	}
	if len(b) < tableHeaderLen {
		return bad(0, "%d bytes, shorter than the %d-byte header", len(b), tableHeaderLen)
	}
	n, strs := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:]))
	if want := tableHeaderLen + n*tableRecordLen + strs; uint64(len(b)) != want {
		return bad(0, "%d bytes, want %d for %d symbols and %d bytes of names", len(b), want, n, strs)
	}
	names := string(b[tableHeaderLen+n*tableRecordLen:]) // one copy; every name is a substring
	t := &Table{
		starts:    make([]uint64, n),
		syms:      make([]Symbol, n),
		demangled: make([]atomic.Pointer[string], n),
	}
	for i := range t.syms {
		off := tableHeaderLen + i*tableRecordLen
		r := b[off : off+tableRecordLen]
		start, size := le.Uint64(r), le.Uint64(r[8:])
		nameOff, nameLen := uint64(le.Uint32(r[16:])), uint64(le.Uint32(r[20:]))
		switch {
		case i > 0 && start <= t.starts[i-1]:
			return bad(off, "symbol %d starts at %#x, not above symbol %d's %#x", i, start, i-1, t.starts[i-1])
		case size == 0:
			return bad(off+8, "symbol %d has size 0", i)
		case start+size < start:
			return bad(off+8, "symbol %d at %#x: size %#x wraps around", i, start, size)
		case nameOff+nameLen > strs:
			return bad(off+16, "symbol %d's name [%d, +%d) is past the %d bytes of names", i, nameOff, nameLen, strs)
		case nameLen == 0:
			return bad(off+20, "symbol %d has no name", i)
		}
		raw := names[nameOff : nameOff+nameLen]
		name := raw
		if mangled(raw) {
			name = "" // demangled on first use, as build leaves it
		}
		t.starts[i] = start
		t.syms[i] = Symbol{Name: name, Raw: raw, Start: start, Size: size}
	}
	t.linkParents()
	return t, nil
}

// FuncNames is FuncValues' answer in a form that needs no map: the names
// sorted, looked up by binary search, and kept by a cache (AppendBinary):
// libc's, with its debug file's, is 10,000 names, 2 ms to read from the
// symbol tables into a map on every run.
type FuncNames struct {
	names  []string // ascending, distinct
	values []uint64
}

// NewFuncNames sorts values (FuncValues' map).
func NewFuncNames(values map[string]uint64) *FuncNames {
	f := &FuncNames{names: make([]string, 0, len(values))}
	for name := range values {
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	f.values = make([]uint64, len(f.names))
	for i, name := range f.names {
		f.values[i] = values[name]
	}
	return f
}

// Value is the value of the function named name; ok is false if none.
func (f *FuncNames) Value(name string) (v uint64, ok bool) {
	if f == nil {
		return 0, false
	}
	i, found := slices.BinarySearch(f.names, name)
	if !found {
		return 0, false
	}
	return f.values[i], true
}

// Len is the number of names.
func (f *FuncNames) Len() int {
	if f == nil {
		return 0
	}
	return len(f.names)
}

// The binary form of FuncNames, little-endian: count and bytes of names
// (uint32 each); count records of 16 bytes (value uint64, name offset and
// length uint32); the names, back to back.
const funcNameRecordLen = 16

// AppendBinary appends f's binary form to b.
func (f *FuncNames) AppendBinary(b []byte) ([]byte, error) {
	le := binary.LittleEndian
	strs := 0
	for _, name := range f.names {
		strs += len(name)
	}
	if uint64(len(f.names)) > 1<<31 || uint64(strs) > 1<<32-1 {
		return b, fmt.Errorf("symbols: %d function names (%d bytes) too many to encode", len(f.names), strs)
	}
	b = le.AppendUint32(b, uint32(len(f.names)))
	b = le.AppendUint32(b, uint32(strs))
	off := 0
	for i, name := range f.names {
		b = le.AppendUint64(b, f.values[i])
		b = le.AppendUint32(b, uint32(off))
		b = le.AppendUint32(b, uint32(len(name)))
		off += len(name)
	}
	for _, name := range f.names {
		b = append(b, name...)
	}
	return b, nil
}

// UnmarshalFuncNames decodes FuncNames from their binary form. The names
// must be non-empty and strictly ascending (what Value's search needs);
// an error is a *FormatError naming the record and its offset.
func UnmarshalFuncNames(b []byte) (*FuncNames, error) {
	le := binary.LittleEndian
	bad := func(off int, format string, args ...any) (*FuncNames, error) {
		return nil, &FormatError{Section: "encoded function names", Err: fmt.Errorf("offset %d: "+format, append([]any{off}, args...)...)}
	}
	if len(b) < tableHeaderLen {
		return bad(0, "%d bytes, shorter than the %d-byte header", len(b), tableHeaderLen)
	}
	n, strs := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:]))
	if want := tableHeaderLen + n*funcNameRecordLen + strs; uint64(len(b)) != want {
		return bad(0, "%d bytes, want %d for %d names of %d bytes", len(b), want, n, strs)
	}
	blob := string(b[tableHeaderLen+n*funcNameRecordLen:])
	f := &FuncNames{names: make([]string, n), values: make([]uint64, n)}
	for i := range f.names {
		off := tableHeaderLen + i*funcNameRecordLen
		r := b[off : off+funcNameRecordLen]
		nameOff, nameLen := uint64(le.Uint32(r[8:])), uint64(le.Uint32(r[12:]))
		switch {
		case nameOff+nameLen > strs:
			return bad(off+8, "name %d [%d, +%d) is past the %d bytes of names", i, nameOff, nameLen, strs)
		case nameLen == 0:
			return bad(off+12, "name %d is empty", i)
		}
		f.names[i], f.values[i] = blob[nameOff:nameOff+nameLen], le.Uint64(r)
		if i > 0 && f.names[i] <= f.names[i-1] {
			return bad(off+8, "name %d %q is not after name %d %q", i, f.names[i], i-1, f.names[i-1])
		}
	}
	return f, nil
}
