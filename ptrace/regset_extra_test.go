//go:build linux

package ptrace

import (
	"encoding/binary"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

// The s390x FPRs land in DWARF 16-31 in the ABI's order, not f0-f15.
func TestPutS390XFPRs(t *testing.T) {
	raw := make([]byte, 8+16*8)
	binary.BigEndian.PutUint32(raw, 0xfc) // fpc, ignored
	for f := 0; f < 16; f++ {
		binary.BigEndian.PutUint64(raw[8+8*f:], 0x100+uint64(f))
	}
	var s regs.Set
	if err := putS390XFPRs(raw, binary.BigEndian, &s); err != nil {
		t.Fatal(err)
	}
	want := []uint64{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}
	for i, f := range want {
		if v, ok := s.Get(16 + i); !ok || v != 0x100+f {
			t.Errorf("DWARF %d = %#x (valid %v), want f%d", 16+i, v, ok, f)
		}
	}
	if _, ok := s.Get(15); ok {
		t.Error("a GPR became valid")
	}
	if err := putS390XFPRs(raw[:100], binary.BigEndian, &s); err == nil {
		t.Error("short NT_PRFPREG accepted")
	}
}
