package sframereport

import (
	"bytes"
	"encoding/binary"
)

// Test ELF files are built here rather than checked in, so each test states
// the exact bytes it depends on.

// v2Section is a hand-encoded SFrame V2 section (AMD64, FDE_SORTED |
// FDE_FUNC_START_PCREL) loaded at vaddr, with one FDE for [fnStart,
// fnStart+16) and two rows: sp+8 at entry, sp+16 with FP at c-16 after one
// byte.
func v2Section(vaddr, fnStart uint64) []byte {
	le := binary.LittleEndian
	var b []byte
	b = append(b, 0xe2, 0xde, 2, 0x05) // magic, version 2, flags
	b = append(b, 3, 0, 0xf8, 0)       // AMD64, fixed FP 0, fixed RA -8, no aux header
	b = le.AppendUint32(b, 1)          // FDEs
	b = le.AppendUint32(b, 2)          // FREs
	b = le.AppendUint32(b, 7)          // FRE sub-section length
	b = le.AppendUint32(b, 0)          // FDE offset
	b = le.AppendUint32(b, 20)         // FRE offset: after one 20-byte FDE
	// FDE 0, at section offset 28: start relative to the field itself.
	b = le.AppendUint32(b, uint32(int32(int64(fnStart)-int64(vaddr+28))))
	b = le.AppendUint32(b, 16) // size
	b = le.AppendUint32(b, 0)  // first FRE offset
	b = le.AppendUint32(b, 2)  // FREs
	b = append(b, 0x00, 0, 0, 0)
	// FREs: ADDR1 start, info (bit 0 SP base, bits 1-4 word count, 1-byte words).
	b = append(b, 0x00, 0x03, 8)
	b = append(b, 0x01, 0x05, 16, 0xf0)
	return b
}

// Expected readelf rows of v2Section at fnStart 0x1000.
const v2Rows = `Contents of the SFrame section .sframe:
  Header :

    Version: SFRAME_VERSION_2
    Flags: SFRAME_F_FDE_SORTED,
           SFRAME_F_FDE_FUNC_START_PCREL
    CFA fixed RA offset: -8
    Num FDEs: 1
    Num FREs: 2

  Function Index :

    func idx [0]: pc = 0x1000, size = 16 bytes
    STARTPC         CFA       FP        RA           
    0000000000001000  sp+8      u         f            
    0000000000001001  sp+16     c-16      f            
`

type testSym struct {
	name       string
	value, siz uint64
}

// buildExec returns a little-endian x86-64 ET_EXEC with 0x40 bytes of code
// at 0x1000 (one PF_X PT_LOAD), the given function symbols, and, unless
// sframe is nil, a .sframe section at 0x2000 with its PT_GNU_SFRAME.
func buildExec(sframe []byte, syms []testSym) []byte {
	le := binary.LittleEndian
	const (
		textAddr   = 0x1000
		textSize   = 0x40
		sframeAddr = 0x2000
	)
	type sec struct {
		name                      string
		typ                       uint32
		flags, addr               uint64
		data                      []byte
		link, info, align, entsiz uint64
		off                       uint64
	}
	shstr := []byte{0}
	nameOff := func(s string) uint32 {
		o := len(shstr)
		shstr = append(append(shstr, s...), 0)
		return uint32(o)
	}
	secs := []*sec{{}}
	secs = append(secs, &sec{name: ".text", typ: 1, flags: 0x6, addr: textAddr, data: make([]byte, textSize), align: 16})
	sframeIdx := -1
	if sframe != nil {
		sframeIdx = len(secs)
		secs = append(secs, &sec{name: ".sframe", typ: 1, flags: 0x2, addr: sframeAddr, data: sframe, align: 8})
	}
	if syms != nil {
		strtab := []byte{0}
		symtab := make([]byte, 24) // null symbol
		for _, s := range syms {
			e := make([]byte, 24)
			le.PutUint32(e, uint32(len(strtab)))
			strtab = append(append(strtab, s.name...), 0)
			e[4] = 0x12 // STB_GLOBAL, STT_FUNC
			le.PutUint16(e[6:], 1)
			le.PutUint64(e[8:], s.value)
			le.PutUint64(e[16:], s.siz)
			symtab = append(symtab, e...)
		}
		strIdx := uint64(len(secs) + 1)
		secs = append(secs, &sec{name: ".symtab", typ: 2, data: symtab, link: strIdx, info: 1, align: 8, entsiz: 24})
		secs = append(secs, &sec{name: ".strtab", typ: 3, data: strtab, align: 1})
	}
	shstrIdx := len(secs)
	secs = append(secs, &sec{name: ".shstrtab", typ: 3, align: 1})

	names := make([]uint32, len(secs))
	for i, s := range secs[1:] {
		names[i+1] = nameOff(s.name)
	}
	secs[shstrIdx].data = shstr

	nph := 1
	if sframe != nil {
		nph = 2
	}
	off := uint64(64 + 56*nph)
	for _, s := range secs[1:] {
		if s.align > 1 {
			off = (off + s.align - 1) &^ (s.align - 1)
		}
		s.off = off
		off += uint64(len(s.data))
	}
	shoff := (off + 7) &^ 7

	var b bytes.Buffer
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1 // ELFCLASS64, little-endian, EV_CURRENT
	le.PutUint16(h[16:], 2)    // ET_EXEC
	le.PutUint16(h[18:], 62)   // EM_X86_64
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[24:], textAddr)
	le.PutUint64(h[32:], 64) // phoff
	le.PutUint64(h[40:], shoff)
	le.PutUint16(h[52:], 64)
	le.PutUint16(h[54:], 56)
	le.PutUint16(h[56:], uint16(nph))
	le.PutUint16(h[58:], 64)
	le.PutUint16(h[60:], uint16(len(secs)))
	le.PutUint16(h[62:], uint16(shstrIdx))
	b.Write(h)
	phdr := func(typ, flags uint32, s *sec) {
		p := make([]byte, 56)
		le.PutUint32(p, typ)
		le.PutUint32(p[4:], flags)
		le.PutUint64(p[8:], s.off)
		le.PutUint64(p[16:], s.addr)
		le.PutUint64(p[24:], s.addr)
		le.PutUint64(p[32:], uint64(len(s.data)))
		le.PutUint64(p[40:], uint64(len(s.data)))
		le.PutUint64(p[48:], 8)
		b.Write(p)
	}
	phdr(1, 5, secs[1]) // PT_LOAD, R+X, .text
	if sframe != nil {
		phdr(0x6474e554, 4, secs[sframeIdx])
	}
	for _, s := range secs[1:] {
		for uint64(b.Len()) < s.off {
			b.WriteByte(0)
		}
		b.Write(s.data)
	}
	for uint64(b.Len()) < shoff {
		b.WriteByte(0)
	}
	for i, s := range secs {
		e := make([]byte, 64)
		if i > 0 {
			le.PutUint32(e, names[i])
			le.PutUint32(e[4:], s.typ)
			le.PutUint64(e[8:], s.flags)
			le.PutUint64(e[16:], s.addr)
			le.PutUint64(e[24:], s.off)
			le.PutUint64(e[32:], uint64(len(s.data)))
			le.PutUint32(e[40:], uint32(s.link))
			le.PutUint32(e[44:], uint32(s.info))
			le.PutUint64(e[48:], s.align)
			le.PutUint64(e[56:], s.entsiz)
		}
		b.Write(e)
	}
	return b.Bytes()
}
