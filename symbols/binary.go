package symbols

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

// The binary form of a Table, for a cache that keeps it between runs
// (debuginfo.Cache): building libc's table from its symbol tables and its
// debug file's costs about 4 ms of CPU on every run, decoding this form a
// tenth of that. Little-endian:
//
//	count   uint32            symbols
//	strings uint32            bytes of names
//	count records of 28 bytes: start, size uint64; name offset, name
//	                           length uint32; parent int32
//	strings bytes             the raw names, back to back
//
// The records are the Table's as built: ascending strictly by start, each
// with its enclosing symbol (parent, -1 for none). UnmarshalTable checks
// all of that: a Table it returns answers Lookup as the one encoded did,
// and bad input is an error, never a panic or an endless parent chain.
const (
	tableHeaderLen = 8
	tableRecordLen = 28
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
		b = le.AppendUint32(b, uint32(t.parent[i]))
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
		parent:    make([]int32, n),
		demangled: make([]atomic.Pointer[string], n),
	}
	for i := range t.syms {
		off := tableHeaderLen + i*tableRecordLen
		r := b[off : off+tableRecordLen]
		start, size := le.Uint64(r), le.Uint64(r[8:])
		nameOff, nameLen := uint64(le.Uint32(r[16:])), uint64(le.Uint32(r[20:]))
		parent := int32(le.Uint32(r[24:]))
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
		case parent < -1 || int(parent) >= i:
			return bad(off+24, "symbol %d's parent %d is not an earlier symbol", i, parent)
		}
		raw := names[nameOff : nameOff+nameLen]
		name := raw
		if mangled(raw) {
			name = "" // demangled on first use, as build leaves it
		}
		t.starts[i] = start
		t.syms[i] = Symbol{Name: name, Raw: raw, Start: start, Size: size}
		t.parent[i] = parent
	}
	return t, nil
}
