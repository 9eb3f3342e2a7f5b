package sframe

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// Each case patches a valid section and expects a *FormatError at an exact
// offset whose message mentions what is wrong.
func TestCorruptInput(t *testing.T) {
	// V2 aarch64 BE and V3 AMD64 LE bases; offsets come from the encoder.
	v2 := tSection{Version: 2, Flags: FlagFDESorted | FlagFDEFuncStartPCRel, ABI: ABIAArch64BigEndian, Vaddr: 0x1000,
		FDEs: abiFuncs(ABIAArch64BigEndian, 2)}
	v3 := tSection{Version: 3, Flags: FlagFDESorted | FlagFDEFuncStartPCRel, ABI: ABIAMD64LittleEndian, FixRA: -8, Vaddr: 0x1000,
		FDEs: abiFuncs(ABIAMD64LittleEndian, 3)}
	flex := encoderCases()[len(encoderCases())-1].sec
	be, le := binary.BigEndian, binary.LittleEndian

	type tc struct {
		name  string
		base  *tSection
		patch func(b []byte, l encLayout) []byte
		off   func(l encLayout) int
		msg   string
	}
	at := func(n int) func(encLayout) int { return func(encLayout) int { return n } }
	cases := []tc{
		{"empty", &v3, func(b []byte, _ encLayout) []byte { return b[:3] }, at(0), "truncated preamble"},
		{"magic", &v3, func(b []byte, _ encLayout) []byte { b[0] = 0xee; return b }, at(0), "bad magic"},
		{"version 0", &v3, func(b []byte, _ encLayout) []byte { b[2] = 0; return b }, at(2), "version"},
		{"version 4", &v3, func(b []byte, _ encLayout) []byte { b[2] = 4; return b }, at(2), "version"},
		{"v3 frame-pointer flag", &v3, func(b []byte, _ encLayout) []byte { b[3] |= 0x02; return b }, at(3), "flags"},
		{"v3 unknown flag", &v3, func(b []byte, _ encLayout) []byte { b[3] |= 0x80; return b }, at(3), "flags"},
		{"v1 pcrel flag", &tSection{Version: 1, Flags: FlagFDESorted | FlagFDEFuncStartPCRel, ABI: ABIAMD64LittleEndian, FixRA: -8}, nil, at(3), "flags"},
		{"truncated header", &v3, func(b []byte, _ encLayout) []byte { return b[:20] }, at(0), "truncated header"},
		{"unknown ABI", &v3, func(b []byte, _ encLayout) []byte { b[4] = 9; return b }, at(4), "unknown ABI"},
		{"BE ABI in LE section", &v3, func(b []byte, _ encLayout) []byte { b[4] = 4; return b }, at(4), "big-endian ABI"},
		{"LE ABI in BE section", &v2, func(b []byte, _ encLayout) []byte { b[4] = 2; return b }, at(4), "little-endian ABI"},
		{"aux header beyond end", &v3, func(b []byte, _ encLayout) []byte { b[7] = 0xff; return b[:100] }, at(7), "auxiliary header"},
		{"FDE table beyond end", &v3, func(b []byte, _ encLayout) []byte { le.PutUint32(b[8:], 1000); return b }, at(20), "FDE sub-section"},
		{"FRE table beyond end", &v3, func(b []byte, _ encLayout) []byte { le.PutUint32(b[16:], 1<<20); return b }, at(24), "FRE sub-section"},
		{"FRE table overlaps FDEs", &v3, func(b []byte, _ encLayout) []byte { le.PutUint32(b[24:], 8); return b }, at(24), "overlaps"},
		{"trailing junk", &v3, func(b []byte, _ encLayout) []byte { return append(b, 0, 0, 7) }, func(l encLayout) int { return -1 }, "non-zero byte"},
		{"FRE count too large", &v3, func(b []byte, _ encLayout) []byte { le.PutUint32(b[12:], 1000); return b }, at(12), "cannot fit"},
		{"FRE count mismatch", &v3, func(b []byte, _ encLayout) []byte { le.PutUint32(b[12:], le.Uint32(b[12:])-1); return b }, func(l encLayout) int { return l.fde[len(l.fde)-1] }, "more than the header"},
		{"v3 attr beyond FREs", &v3, func(b []byte, l encLayout) []byte { le.PutUint32(b[l.fde[1]+12:], 1<<16); return b }, func(l encLayout) int { return l.fde[1] + 12 }, "attribute block"},
		{"v2 FREs beyond FRE table", &v2, func(b []byte, l encLayout) []byte { be.PutUint32(b[l.fde[1]+8:], 1<<16); return b }, func(l encLayout) int { return l.fde[1] + 8 }, "beyond the FRE sub-section"},
		{"FRE type 3", &v3, func(b []byte, l encLayout) []byte { b[l.attr[0]+2] |= 3; return b }, func(l encLayout) int { return l.attr[0] + 2 }, "FRE type"},
		{"v2 FRE type 15", &v2, func(b []byte, l encLayout) []byte { b[l.fde[0]+16] |= 0xf; return b }, func(l encLayout) int { return l.fde[0] + 16 }, "FRE type"},
		{"FDE type 2", &v3, func(b []byte, l encLayout) []byte { b[l.attr[0]+3] = 2; return b }, func(l encLayout) int { return l.attr[0] + 3 }, "FDE type"},
		{"PCMASK block 0", &v3, func(b []byte, l encLayout) []byte { b[l.attr[1]+4] = 0; return b }, func(l encLayout) int { return l.attr[1] + 4 }, "zero block size"},
		{"word size code 3", &v3, func(b []byte, l encLayout) []byte { b[l.fre[0][1]+1] |= 0x60; return b }, func(l encLayout) int { return l.fre[0][1] + 1 }, "size code 3"},
		{"FRE starts not increasing", &v3, func(b []byte, l encLayout) []byte { b[l.fre[0][2]] = 1; return b }, func(l encLayout) int { return l.fre[0][2] }, "not above"},
		{"PCINC start beyond size", &v3, func(b []byte, l encLayout) []byte { b[l.fre[0][3]] = 0x21; return b }, func(l encLayout) int { return l.fre[0][3] }, "beyond the function size"},
		{"too many default words", &v3, func(b []byte, l encLayout) []byte {
			b[l.fre[0][0]+1] = 1 | 3<<1 // 3 words where AMD64 holds 2; swallows the next FRE
			return b
		}, func(l encLayout) int { return l.fre[0][0] }, "default layout"},
		{"aarch64 four words", &v2, func(b []byte, l encLayout) []byte {
			b[l.fre[0][0]+1] = 1 | 4<<1
			return b
		}, func(l encLayout) int { return l.fre[0][0] }, "default layout"},
		{"15 words", &v2, func(b []byte, l encLayout) []byte { b[l.fre[0][0]+1] = 1 | 15<<1; return b }, func(l encLayout) int { return l.fre[0][0] + 1 }, "data words"},
		{"FRE beyond FRE table", &v3, func(b []byte, _ encLayout) []byte {
			le.PutUint32(b[16:], le.Uint32(b[16:])-1) // last FRE loses its last byte
			return b[:len(b)-1]
		}, func(l encLayout) int { return l.fre[len(l.fre)-1][1] }, "beyond the FRE sub-section"},
		{"sorted flag, unsorted starts", &v3, func(b []byte, l encLayout) []byte {
			le.PutUint64(b[l.fde[2]:], le.Uint64(b[l.fde[2]:])-0x2000)
			return b
		}, func(l encLayout) int { return l.fde[2] }, "not above"},
		{"flex CFA without register", &flex, func(b []byte, l encLayout) []byte { b[l.fre[0][0]+2] = 0x02; return b }, func(l encLayout) int { return l.fre[0][0] }, "names no register"},
		{"flex one word", &flex, func(b []byte, l encLayout) []byte {
			b[l.fre[0][0]+1] = 1 << 1 // 1 word: the offset byte becomes the next FRE's start
			return b
		}, func(l encLayout) int { return l.fre[0][0] }, "needs a CFA control"},
		{"flex reserved bit", &flex, func(b []byte, l encLayout) []byte { b[l.fre[0][0]+2] |= 0x04; return b }, func(l encLayout) int { return l.fre[0][0] }, "reserved bit"},
		{"flex RA without offset", &flex, func(b []byte, l encLayout) []byte {
			// FRE 4 has CFA pair + RA pair; claim 3 words.
			b[l.fre[0][4]+1] = 3 << 1
			return b
		}, func(l encLayout) int { return l.fre[0][4] }, "without an offset"},
		{"flex value rule for RA", &flex, func(b []byte, l encLayout) []byte { b[l.fre[0][4]+4] = 0x08; return b }, func(l encLayout) int { return l.fre[0][4] }, "invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, l := c.base.encode()
			if c.patch != nil {
				b = c.patch(b, l)
			}
			want := c.off(l)
			if want < 0 {
				want += len(b)
			}
			s, err := Parse(b, c.base.Vaddr)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, %v; want a *FormatError", s, err)
			}
			if fe.Off != int64(want) || !strings.Contains(fe.Msg, c.msg) {
				t.Fatalf("error %q at %#x, want %q at %#x", fe.Msg, fe.Off, c.msg, want)
			}
		})
	}
}
