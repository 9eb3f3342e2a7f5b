package cfi

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// This file decodes the CIEs and FDEs of a section in any byte order,
// for Build: delve's parser reads little-endian only (s390x objects are
// big-endian) and costs an allocation per FDE. The layouts are DWARF 5 section 6.4.1 (.debug_frame) and
// the Linux Standard Base's .eh_frame (CIE id 0, a CIE pointer relative
// to itself, pointer encodings from the "z" augmentation).

// Pointer encodings of .eh_frame (DW_EH_PE_*).
const (
	peAbsptr  = 0x00
	peULEB128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSigned  = 0x08 // signed, pointer-sized: 8 bytes here
	peSLEB128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c
	pePCRel   = 0x10
	peDataRel = 0x30
	peOmit    = 0xff
)

// maxEntries bounds the FDEs of one section, so hostile bytes cannot make
// the table grow without bound (libc has about 4,000).
const maxEntries = 1 << 20

// entryCIE is a parsed CIE.
type entryCIE struct {
	info   *cieInfo
	fdeEnc byte // 'R' augmentation: pointer encoding of FDE addresses
	hasZ   bool
}

// parseEntries decodes every CIE and FDE of s with fixed-size fields in
// order; an FDE refers to its CIE by offset. Errors carry the section
// offset of the entry.
func parseEntries(s *Section, order binary.ByteOrder) ([]parsedFDE, error) {
	data := s.Data[:len(s.Data):len(s.Data)]
	eh := s.Name == ".eh_frame"
	be := order == binary.BigEndian
	cies := map[int]*entryCIE{}
	out := make([]parsedFDE, 0, countEntries(data, order))
	fail := func(off int, format string, args ...any) error {
		return &FormatError{Section: s.Name, Offset: int64(off), Msg: fmt.Sprintf(format, args...)}
	}
	for off := 0; off < len(data); {
		r := reader{b: data, off: off, be: be}
		length := r.uint(4)
		idSize := 4
		if length == 0xffffffff {
			length = r.uint(8)
			idSize = 8
		}
		if r.err != nil {
			return nil, fail(off, "truncated entry length")
		}
		if length != 0 && length < uint64(idSize) {
			return nil, fail(off, "entry length %#x shorter than its %d-byte CIE id", length, idSize)
		}
		if length == 0 {
			// The .eh_frame terminator, or, inside a section that
			// several inputs were joined into (ld -r, gold), the end of
			// one of them: the FDEs after it are found at run time
			// through .eh_frame_hdr, so they are read on.
			off = r.off
			continue
		}
		if length > uint64(len(data)-r.off) {
			return nil, fail(off, "entry length %#x beyond the section", length)
		}
		end := r.off + int(length)
		idOff := r.off
		id := r.uint(idSize)
		isCIE := (eh && id == 0) || (!eh && (id == 0xffffffff || id == 0xffffffffffffffff))
		// The body ends at the entry's end; its slices (a program's
		// bytes) keep the section's capacity, so len(Data)-cap is their
		// section offset (table.go).
		body := reader{b: data[:end], off: r.off, be: be}
		if isCIE {
			c, err := parseCIE(&body, eh)
			if err != nil {
				return nil, fail(off, "CIE: %v", err)
			}
			cies[off] = c
		} else {
			cieOff := int(id)
			if eh {
				cieOff = idOff - int(id)
			}
			if id > uint64(len(data)) || cieOff < 0 {
				return nil, fail(off, "FDE's CIE pointer %#x outside the section", id)
			}
			c, ok := cies[cieOff]
			if !ok {
				// A CIE after its FDE is legal in .debug_frame: parse it
				// where it is.
				var err error
				if c, err = parseCIEAt(data, cieOff, eh, be); err != nil {
					return nil, fail(off, "FDE's CIE at %#x: %v", cieOff, err)
				}
				cies[cieOff] = c
			}
			f, err := parseFDE(&body, s, c, eh)
			if err != nil {
				return nil, fail(off, "FDE: %v", err)
			}
			if f.end > f.start && f.start != 0 {
				if len(out) >= maxEntries {
					return nil, fail(off, "more than %d FDEs", maxEntries)
				}
				out = append(out, f)
			}
		}
		off = end
	}
	return out, nil
}

// countEntries is the number of entries (CIEs and FDEs) of a section, by
// their 32-bit lengths alone, at most maxEntries: the capacity
// parseEntries reserves, so its FDEs are not copied as the slice grows
// (libc: 3,700 FDEs, 200 KB). A terminator, a 64-bit length or the end of
// the data ends the count (a hint only: parseEntries checks every entry).
func countEntries(data []byte, order binary.ByteOrder) int {
	n := 0
	// An entry takes 16 bytes at least (an FDE's length, CIE pointer and
	// address range): hostile 5-byte entries reserve no more than that.
	limit := min(maxEntries, len(data)/16+1)
	for off := 0; off+4 <= len(data) && n < limit; n++ {
		length := order.Uint32(data[off:])
		if length == 0 || length >= 0xfffffff0 {
			break
		}
		off += 4 + int(length)
	}
	return n
}

// parseCIEAt parses the CIE whose entry starts at off.
func parseCIEAt(data []byte, off int, eh, be bool) (*entryCIE, error) {
	r := reader{b: data, off: off, be: be}
	length := r.uint(4)
	idSize := 4
	if length == 0xffffffff {
		length = r.uint(8)
		idSize = 8
	}
	if r.err != nil || length > uint64(len(data)-r.off) || length < uint64(idSize) {
		return nil, fmt.Errorf("bad entry length")
	}
	end := r.off + int(length)
	id := r.uint(idSize)
	if (eh && id != 0) || (!eh && id != 0xffffffff && id != 0xffffffffffffffff) {
		return nil, fmt.Errorf("not a CIE")
	}
	body := reader{b: data[:end], off: r.off, be: be}
	return parseCIE(&body, eh)
}

// parseCIE reads a CIE's fields after its id; r ends at the entry's end.
func parseCIE(r *reader, eh bool) (*entryCIE, error) {
	version := r.u8()
	if version != 1 && version != 3 && version != 4 {
		return nil, fmt.Errorf("version %d", version)
	}
	start := r.off
	for r.off < len(r.b) && r.b[r.off] != 0 {
		r.off++
	}
	aug := string(r.b[start:r.off])
	r.u8() // the NUL
	if !eh && version == 4 {
		if as := r.u8(); as != 8 {
			return nil, fmt.Errorf("address size %d", as)
		}
		r.u8() // segment selector size
	}
	c := &entryCIE{fdeEnc: peAbsptr, hasZ: strings.HasPrefix(aug, "z")}
	h := cieHeader{aug: aug}
	h.codeAlig = r.uleb()
	h.dataAlig = r.sleb()
	if version == 1 {
		h.raReg = uint64(r.u8())
	} else {
		h.raReg = r.uleb()
	}
	if c.hasZ {
		n := r.uleb()
		if r.err == nil && n > uint64(len(r.b)-r.off) {
			return nil, fmt.Errorf("augmentation data length %d", n)
		}
		augEnd := r.off + int(n)
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.fdeEnc = r.u8()
				if c.fdeEnc != peOmit && c.fdeEnc&0x80 != 0 {
					// An FDE's address behind a pointer: read as the
					// pointer's own address it would give wrong ranges.
					return nil, fmt.Errorf("FDE pointer encoding %#x is indirect", c.fdeEnc)
				}
			case 'L':
				r.u8()
			case 'P':
				enc := r.u8()
				readEncoded(r, enc, 0)
			case 'S', 'B', 'G':
			default:
				ch = 0 // unknown: the length lets us skip the rest
			}
			if ch == 0 {
				break
			}
		}
		r.off = augEnd
	} else if aug != "" && aug != "S" {
		return nil, fmt.Errorf("augmentation %q without length", aug)
	}
	if r.err != nil {
		return nil, r.err
	}
	h.initial = r.b[r.off:len(r.b)] // capacity to the section's end: its offset is len-cap
	c.info = &cieInfo{hdr: h, signal: strings.ContainsRune(aug, 'S')}
	return c, nil
}

// parseFDE reads an FDE's fields after its CIE pointer.
func parseFDE(r *reader, s *Section, c *entryCIE, eh bool) (parsedFDE, error) {
	var start, size uint64
	if eh {
		start = readEncoded(r, c.fdeEnc, s.Addr)
		size = readEncoded(r, c.fdeEnc&0x0f, 0) // the range is not relative
	} else {
		start, size = r.uint(8), r.uint(8)
	}
	if c.hasZ {
		n := r.uleb()
		if r.err == nil && n > uint64(len(r.b)-r.off) {
			return parsedFDE{}, fmt.Errorf("augmentation data length %d", n)
		}
		r.off += int(n)
	}
	if r.err != nil {
		return parsedFDE{}, r.err
	}
	end := start + size
	if end < start {
		return parsedFDE{}, fmt.Errorf("range %#x+%#x wraps", start, size)
	}
	return parsedFDE{start: start, end: end, insns: r.b[r.off:len(r.b)], sec: s, cie: c.info}, nil
}

// readEncoded reads a pointer in encoding enc; secAddr is the section's
// address, for pc-relative pointers (the field's own address).
func readEncoded(r *reader, enc byte, secAddr uint64) uint64 {
	if enc == peOmit {
		return 0
	}
	fieldAddr := secAddr + uint64(r.off)
	var v uint64
	switch enc & 0x0f {
	case peAbsptr, peUdata8, peSigned, peSdata8:
		v = r.uint(8)
	case peULEB128:
		v = r.uleb()
	case peSLEB128:
		v = uint64(r.sleb())
	case peUdata2:
		v = r.uint(2)
	case peSdata2:
		v = uint64(int64(int16(r.uint(2))))
	case peUdata4:
		v = r.uint(4)
	case peSdata4:
		v = uint64(int64(int32(r.uint(4))))
	default:
		r.fail(fmt.Sprintf("pointer encoding %#x", enc))
		return 0
	}
	switch enc & 0x70 {
	case 0:
	case pePCRel:
		v += fieldAddr
	default:
		r.fail(fmt.Sprintf("pointer application %#x", enc&0x70))
		return 0
	}
	return v
}
