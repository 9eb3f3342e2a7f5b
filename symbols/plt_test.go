package symbols

import (
	"encoding/binary"
	"testing"
)

// TestDecodeA64PLT runs the AArch64 decoder over a PLT as GNU ld lays it
// out (PLT0 of 32 bytes, then 16-byte entries), and over the BTI variant
// whose entries start with "bti c". The instruction words are the ones
// objdump shows for such PLTs: adrp x16, <page>; ldr x17, [x16, #off];
// add x16, x16, #off; br x17.
func TestDecodeA64PLT(t *testing.T) {
	const (
		stp     = 0xa9bf7bf0 // stp x16, x30, [sp, #-16]!
		add16   = 0x91000210 // add x16, x16, #0 (immediate not decoded)
		brX17   = 0xd61f0220 // br x17
		nop     = 0xd503201f
		adrp    = 0x90000010 // adrp x16, +0 pages (immhi/immlo patched below)
		ldrBase = 0xf9400211 // ldr x17, [x16, #0] (imm12 patched below)
	)
	// adrpTo encodes "adrp x16" at pc reaching the page of target.
	adrpTo := func(pc, target uint64) uint32 {
		pages := uint32((target>>12)-(pc>>12)) & 0x1fffff
		return adrp | (pages&3)<<29 | (pages>>2)<<5
	}
	ldrOff := func(target uint64) uint32 { return ldrBase | uint32(target&0xfff/8)<<10 }

	const base, got = 0x400, 0x11fe8
	for _, bti := range []bool{false, true} {
		var words []uint32
		// PLT0 loads GOT[2], which no relocation names.
		pc := uint64(base + 4)
		words = append(words, stp, adrpTo(pc, got+16), ldrOff(got+16), add16, brX17, nop, nop, nop)
		var starts []uint64
		for i := range 3 {
			start := base + uint64(len(words))*4
			starts = append(starts, start)
			if bti {
				words = append(words, a64BTIC)
			}
			pc := base + uint64(len(words))*4
			slot := uint64(got + 24 + 8*i)
			words = append(words, adrpTo(pc, slot), ldrOff(slot), add16, brX17)
			if bti {
				words = append(words, nop)
			}
		}
		data := make([]byte, 4*len(words))
		for i, w := range words {
			binary.LittleEndian.PutUint32(data[4*i:], w)
		}
		entries := decodeA64PLT(base, data)
		if len(entries) != 4 {
			t.Fatalf("bti=%v: %d entries, want PLT0 + 3: %+v", bti, len(entries), entries)
		}
		if entries[0].got != got+16 {
			t.Errorf("bti=%v: PLT0 slot %#x, want %#x", bti, entries[0].got, got+16)
		}
		size := uint64(16)
		if bti {
			size = 24
		}
		for i, e := range entries[1:] {
			want := pltEntry{start: starts[i], size: size, got: uint64(got + 24 + 8*i)}
			if e != want {
				t.Errorf("bti=%v entry %d = %+v, want %+v", bti, i, e, want)
			}
		}
	}
}

func TestDecodeA64SlotLoadNegativePage(t *testing.T) {
	// adrp with immhi all ones: -1 page.
	adrp := uint32(0x90000010) | 3<<29 | 0x7ffff<<5
	slot, ok := decodeA64SlotLoad(0x5000, adrp, 0xf9400211|1<<10)
	if !ok || slot != 0x4000+8 {
		t.Errorf("slot = %#x, %v; want 0x4008", slot, ok)
	}
}

func TestDecodeX86IndirectJump(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		end  int
		ok   bool
	}{
		{"lazy", []byte{0xff, 0x25, 0x10, 0, 0, 0, 0x68, 0, 0, 0, 0}, 6, true},
		{"ibt bnd", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x10, 0, 0, 0}, 11, true},
		{"ibt", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25, 0x10, 0, 0, 0}, 10, true},
		{"plt0", []byte{0xff, 0x35, 0x10, 0, 0, 0, 0xff, 0x25, 0, 0, 0, 0}, 0, false},
		{"ibt lazy stub", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0, 0, 0, 0, 0xf2, 0xe9}, 0, false},
		{"truncated", []byte{0xff, 0x25, 0x10}, 0, false},
	} {
		end, disp, ok := decodeX86IndirectJump(tc.b)
		if ok != tc.ok || end != tc.end || (ok && disp != 0x10) {
			t.Errorf("%s: got %d, %#x, %v", tc.name, end, disp, ok)
		}
	}
}
