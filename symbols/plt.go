package symbols

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// PLT entries have no symbols of their own. Like BFD's synthetic symtab
// (what objdump and gdb print as "puts@plt"), we decode each entry's
// indirect jump to find the GOT slot it goes through, and name the entry
// after the dynamic relocation that fills that slot. Decoding the jump,
// rather than assuming "entry i belongs to relocation i", also covers
// .plt.sec (IBT), .plt.got (GLOB_DAT slots in .rela.dyn) and .plt.bnd
// (MPX) without knowing each linker's layout.

// Relocation types that fill a GOT slot a PLT entry jumps through.
type pltRelocTypes struct {
	jumpSlot, globDat, irelative uint32
}

var pltRelocs = map[elf.Machine]pltRelocTypes{
	elf.EM_X86_64:  {uint32(elf.R_X86_64_JMP_SLOT), uint32(elf.R_X86_64_GLOB_DAT), uint32(elf.R_X86_64_IRELATIVE)},
	elf.EM_AARCH64: {uint32(elf.R_AARCH64_JUMP_SLOT), uint32(elf.R_AARCH64_GLOB_DAT), uint32(elf.R_AARCH64_IRELATIVE)},
}

const relaSize = 24 // Elf64_Rela: r_offset, r_info, r_addend

// pltCandidates synthesises a "name@plt" candidate per PLT entry whose GOT
// slot has a named dynamic relocation. *stage is set to the section being
// decoded so a panic or error can name it. Only 64-bit x86-64 and AArch64
// are handled; other objects yield no PLT names.
func pltCandidates(f *elf.File, dynsyms []elf.Symbol, stage *string) ([]candidate, error) {
	types, ok := pltRelocs[f.Machine]
	if !ok || f.Class != elf.ELFCLASS64 {
		return nil, nil
	}
	slots, err := gotSlotNames(f, dynsyms, types, stage)
	if err != nil || len(slots) == 0 {
		return nil, err
	}

	var out []candidate
	for _, sec := range f.Sections {
		switch sec.Name {
		case ".plt", ".plt.sec", ".plt.got", ".plt.bnd":
		default:
			continue
		}
		if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		*stage = sec.Name
		data, err := sec.Data()
		if err != nil {
			return nil, err
		}
		var entries []pltEntry
		switch f.Machine {
		case elf.EM_X86_64:
			entries = decodeX86PLT(sec, data)
		case elf.EM_AARCH64:
			entries = decodeA64PLT(sec.Addr, data)
		}
		for _, e := range entries {
			name, ok := slots[e.got]
			if !ok {
				continue // PLT0, or a slot we cannot name
			}
			out = append(out, candidate{
				raw: name + "@plt", value: e.start, size: e.size, limit: e.start + e.size,
				bind: elf.STB_GLOBAL, isFunc: true,
			})
		}
	}
	return out, nil
}

// gotSlotNames maps GOT slot addresses to the dynamic symbol (or, for
// IRELATIVE, resolver address) their relocation names.
func gotSlotNames(f *elf.File, dynsyms []elf.Symbol, types pltRelocTypes, stage *string) (map[uint64]string, error) {
	slots := make(map[uint64]string)
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_RELA || sec.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		// Dynamic relocations link to .dynsym; a static binary's IRELATIVE
		// .rela.plt links to nothing.
		withSyms := int(sec.Link) < len(f.Sections) && sec.Link != 0 &&
			f.Sections[sec.Link].Type == elf.SHT_DYNSYM
		if sec.Link != 0 && !withSyms {
			continue
		}
		*stage = sec.Name
		data, err := sec.Data()
		if err != nil {
			return nil, err
		}
		for off := 0; off+relaSize <= len(data); off += relaSize {
			slot := f.ByteOrder.Uint64(data[off:])
			info := f.ByteOrder.Uint64(data[off+8:])
			addend := f.ByteOrder.Uint64(data[off+16:])
			typ, sym := uint32(info), info>>32
			switch typ {
			case types.jumpSlot, types.globDat:
				// DynamicSymbols omits the null symbol 0.
				if !withSyms || sym == 0 || sym > uint64(len(dynsyms)) {
					continue
				}
				if name := dynsyms[sym-1].Name; name != "" {
					slots[slot] = name
				}
			case types.irelative:
				if _, named := slots[slot]; !named {
					slots[slot] = fmt.Sprintf("*ABS*+0x%x", addend) // as objdump names it
				}
			}
		}
	}
	return slots, nil
}

// pltEntry is one decoded PLT stub: where it is and the GOT slot it jumps
// through.
type pltEntry struct {
	start, size, got uint64
}

// x86-64 stub encodings.
var (
	endbr64 = [4]byte{0xf3, 0x0f, 0x1e, 0xfa}
)

// x86PLTStride is the entry size of an x86-64 PLT section: sh_entsize when
// the linker set a plausible one, else 16 (lazy .plt, .plt.sec, IBT
// .plt.got) or 8 (.plt.got and .plt.bnd without IBT).
func x86PLTStride(sec *elf.Section, data []byte) int {
	if sec.Entsize == 8 || sec.Entsize == 16 {
		return int(sec.Entsize)
	}
	if (sec.Name == ".plt.got" || sec.Name == ".plt.bnd") &&
		!(len(data) >= 4 && [4]byte(data[:4]) == endbr64) {
		return 8
	}
	return 16
}

// decodeX86PLT finds, per entry, "[endbr64] [bnd] jmp *disp32(%rip)" at
// the entry's start. PLT0 (push GOT+8; jmp *GOT+16) and IBT .plt entries
// (endbr64; push; jmp PLT0) do not match and are skipped.
func decodeX86PLT(sec *elf.Section, data []byte) []pltEntry {
	stride := x86PLTStride(sec, data)
	var out []pltEntry
	for off := 0; off+stride <= len(data); off += stride {
		end, disp, ok := decodeX86IndirectJump(data[off : off+stride])
		if !ok {
			continue
		}
		start := sec.Addr + uint64(off)
		out = append(out, pltEntry{
			start: start,
			size:  uint64(stride),
			got:   start + uint64(end) + uint64(int64(disp)), // RIP-relative: from the next instruction
		})
	}
	return out
}

// decodeX86IndirectJump decodes "[endbr64] [f2] ff 25 disp32" at the start
// of b and returns the offset just past the jmp and its displacement.
func decodeX86IndirectJump(b []byte) (end int, disp int32, ok bool) {
	i := 0
	if len(b) >= 4 && [4]byte(b[:4]) == endbr64 {
		i = 4
	}
	if i < len(b) && b[i] == 0xf2 { // bnd prefix (MPX)
		i++
	}
	if i+6 > len(b) || b[i] != 0xff || b[i+1] != 0x25 {
		return 0, 0, false
	}
	return i + 6, int32(binary.LittleEndian.Uint32(b[i+2:])), true
}

// AArch64 stub: "[bti c] adrp x16, page(slot); ldr x17, [x16, #lo(slot)];
// add x16, x16, #lo(slot); br x17". Instructions are little-endian even on
// big-endian targets.
const (
	a64BTIC      = 0xd503245f
	a64AdrpMask  = 0x9f00001f
	a64AdrpX16   = 0x90000010
	a64LdrMask   = 0xffc003ff // LDR Xt, [Xn, #imm12*8]: keep opcode, Rn, Rt
	a64LdrX17X16 = 0xf9400211 // Rn = x16, Rt = x17
)

// decodeA64PLT scans an AArch64 PLT for adrp/ldr pairs. An entry starts
// at its adrp (or the bti c before it) and ends where the next one starts;
// the last one is as long as the one before it (16 bytes if alone).
func decodeA64PLT(base uint64, data []byte) []pltEntry {
	var out []pltEntry
	for off := 0; off+8 <= len(data); off += 4 {
		pc := base + uint64(off)
		got, ok := decodeA64SlotLoad(pc, binary.LittleEndian.Uint32(data[off:]), binary.LittleEndian.Uint32(data[off+4:]))
		if !ok {
			continue
		}
		start := pc
		if off >= 4 && binary.LittleEndian.Uint32(data[off-4:]) == a64BTIC {
			start -= 4
		}
		out = append(out, pltEntry{start: start, got: got})
		off += 4
	}
	end := base + uint64(len(data))
	for i := range out {
		switch {
		case i+1 < len(out):
			out[i].size = out[i+1].start - out[i].start
		case i > 0:
			out[i].size = out[i-1].size
		default:
			out[i].size = 16
		}
		if out[i].start+out[i].size > end || out[i].start+out[i].size < out[i].start {
			out[i].size = end - out[i].start
		}
	}
	return out
}

// decodeA64SlotLoad decodes "adrp x16, X; ldr x17, [x16, #Y]" at pc and
// returns the address loaded from, X + Y.
func decodeA64SlotLoad(pc uint64, adrp, ldr uint32) (uint64, bool) {
	if adrp&a64AdrpMask != a64AdrpX16 || ldr&a64LdrMask != a64LdrX17X16 {
		return 0, false
	}
	immlo := uint64(adrp>>29) & 3
	immhi := uint64(adrp>>5) & 0x7ffff
	imm := int64(immhi<<2|immlo) << 43 >> 43 // sign-extend 21 bits
	page := pc&^0xfff + uint64(imm)<<12
	return page + uint64(ldr>>10&0xfff)*8, true
}
