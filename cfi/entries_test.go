package cfi

import (
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"
)

// TestInnerTerminator: a section joined from two inputs keeps the first
// one's terminator inside it (ld -r, gold); the FDEs after it are read
// too, as .eh_frame_hdr finds them at run time (delve does the same).
func TestInnerTerminator(t *testing.T) {
	a, _ := ehFrameSection(binary.LittleEndian, elf.EM_X86_64, 0x1000, 2)
	b, _ := ehFrameSection(binary.LittleEndian, elf.EM_X86_64, 0x1000, 2)
	fdes, err := parseEntries(&Section{Name: ".eh_frame", Data: append(a, b...), Addr: 0x1000}, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if len(fdes) != 4 {
		t.Errorf("%d FDEs, want the 2 before the inner terminator and the 2 after it", len(fdes))
	}
}

// TestFDEPointerEncodings: an 'R' encoding with DW_EH_PE_indirect is
// refused (read as the pointer's own address it would give wrong ranges),
// DW_EH_PE_signed (pointer-sized) is read as 8 bytes.
func TestFDEPointerEncodings(t *testing.T) {
	sec := func(enc byte, fdeFields []byte) []byte {
		var s []byte
		u32 := func(v uint32) { s = binary.LittleEndian.AppendUint32(s, v) }
		cie := []byte{1, 'z', 'R', 0, 1, 0x78, 16, 1, enc, 0x0c, 7, 8, 0}
		u32(uint32(4 + len(cie)))
		u32(0)
		s = append(s, cie...)
		fde := append(fdeFields, 0) // augmentation length 0
		for (8+len(fde))%4 != 0 {
			fde = append(fde, 0)
		}
		u32(uint32(4 + len(fde)))
		u32(uint32(len(s))) // back to the CIE at 0
		s = append(s, fde...)
		u32(0)
		return s
	}
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	_, err := parseEntries(&Section{Name: ".eh_frame", Data: sec(0x9b, []byte{0, 0, 0, 0, 0x10, 0, 0, 0})}, binary.LittleEndian)
	if err == nil || !strings.Contains(err.Error(), "indirect") {
		t.Errorf("indirect FDE encoding: %v, want an error", err)
	}
	fdes, err := parseEntries(&Section{Name: ".eh_frame", Data: sec(0x08, append(le64(0x4000), le64(0x20)...))}, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if len(fdes) != 1 || fdes[0].start != 0x4000 || fdes[0].end != 0x4020 {
		t.Errorf("DW_EH_PE_signed FDE: %+v, want [0x4000, 0x4020)", fdes)
	}
}
