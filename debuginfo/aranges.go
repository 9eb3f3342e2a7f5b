package debuginfo

import (
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
)

// parseAranges decodes .debug_aranges (DWARF 2-5, 32- and 64-bit) into the
// PC ranges of each compile unit, keyed by the unit's .debug_info offset.
// It is the index that lets a lookup go straight to the one unit that
// holds a PC without reading any of .debug_info first. Empty ranges are
// dropped.
func parseAranges(b []byte, order binary.ByteOrder) ([]unitRange, error) {
	var out []unitRange
	for off := 0; off < len(b); {
		set := off
		if len(b)-off < 4 {
			return nil, &FormatError{".debug_aranges", int64(off), errors.New("truncated set length")}
		}
		length := uint64(order.Uint32(b[off:]))
		off += 4
		offSize := 4
		if length == 0xffffffff {
			if len(b)-off < 8 {
				return nil, &FormatError{".debug_aranges", int64(off), errors.New("truncated 64-bit set length")}
			}
			length = order.Uint64(b[off:])
			off += 8
			offSize = 8
		} else if length >= 0xfffffff0 {
			return nil, &FormatError{".debug_aranges", int64(set), fmt.Errorf("reserved set length %#x", length)}
		}
		if length > uint64(len(b)-off) {
			return nil, &FormatError{".debug_aranges", int64(set), fmt.Errorf("set of %d bytes overruns the section", length)}
		}
		end := off + int(length)
		body := b[off:end]
		// version (2), debug_info offset, address size, segment selector size.
		if len(body) < 2+offSize+2 {
			return nil, &FormatError{".debug_aranges", int64(off), errors.New("truncated set header")}
		}
		if v := order.Uint16(body); v != 2 && v != 3 {
			// DWARF 2-5 all write version 2 here.
			return nil, &FormatError{".debug_aranges", int64(off), fmt.Errorf("unsupported version %d", v)}
		}
		var cu uint64
		if offSize == 4 {
			cu = uint64(order.Uint32(body[2:]))
		} else {
			cu = order.Uint64(body[2:])
		}
		asize, ssize := int(body[2+offSize]), int(body[3+offSize])
		if asize != 4 && asize != 8 && asize != 2 {
			return nil, &FormatError{".debug_aranges", int64(off + 2 + offSize), fmt.Errorf("unsupported address size %d", asize)}
		}
		if ssize != 0 {
			return nil, &FormatError{".debug_aranges", int64(off + 3 + offSize), fmt.Errorf("segment selectors (size %d) are not supported", ssize)}
		}
		// Tuples start at a multiple of twice the address size from the
		// start of the set.
		hdr := (off - set) + 4 + offSize
		tuple := 2 * asize
		p := set + (hdr+tuple-1)/tuple*tuple
		for ; p+tuple <= end; p += tuple {
			lo, n := readAddr(b[p:], asize, order), readAddr(b[p+asize:], asize, order)
			if lo == 0 && n == 0 {
				break
			}
			if n == 0 || lo+n < lo {
				continue
			}
			out = append(out, unitRange{lo: lo, hi: lo + n, cu: dwarf.Offset(cu)})
		}
		off = end
	}
	return out, nil
}

func readAddr(b []byte, size int, order binary.ByteOrder) uint64 {
	switch size {
	case 2:
		return uint64(order.Uint16(b))
	case 4:
		return uint64(order.Uint32(b))
	}
	return order.Uint64(b)
}
