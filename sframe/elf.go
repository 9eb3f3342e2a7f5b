package sframe

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ELF constants debug/elf does not name.
const (
	ptGNUSFrame  elf.ProgType    = 0x6474e554 // PT_LOOS + 0x474e554
	shtGNUSFrame elf.SectionType = 0x6ffffff4
)

func fromELF(f *elf.File) (*Section, error) {
	if f.Type != elf.ET_REL {
		for _, p := range f.Progs {
			if p.Type != ptGNUSFrame {
				continue
			}
			data, err := readSegment(p)
			if err != nil {
				return nil, fmt.Errorf("sframe: reading PT_GNU_SFRAME segment: %w", err)
			}
			return Parse(data, p.Vaddr)
		}
	}
	sec := f.Section(".sframe")
	if sec == nil {
		for _, s := range f.Sections {
			if s.Type == shtGNUSFrame {
				sec = s
				break
			}
		}
	}
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, ErrNoSFrame
	}
	data, err := io.ReadAll(io.LimitReader(sec.Open(), maxSection+1))
	if err != nil {
		return nil, fmt.Errorf("sframe: reading section %s: %w", sec.Name, err)
	}
	addr := sec.Addr
	if f.Type == elf.ET_REL {
		// A relocatable object has no addresses yet: the section is taken
		// at 0 and the function starts, which the assembler leaves to
		// PC-relative relocations, are resolved against their symbols'
		// section offsets, as readelf 2.46 shows them.
		addr = 0
		if err := relocate(f, sec, data); err != nil {
			return nil, fmt.Errorf("sframe: relocating %s: %w", sec.Name, err)
		}
	}
	return Parse(data, addr)
}

// relocate applies the PC-relative relocations gas emits for FDE start
// fields (a copy of the section is modified, never the file). With the
// section at address 0 a PCREL field receives S+A-P, so that start =
// P + field = S+A; a section-relative field (V1, V2 before 2.45) receives
// S+A directly. Other relocation types are left alone.
func relocate(f *elf.File, sec *elf.Section, data []byte) error {
	if f.Class != elf.ELFCLASS64 || len(data) < 4 {
		return nil
	}
	pcrel := Flags(data[3])&FlagFDEFuncStartPCRel != 0
	var syms []elf.Symbol
	for _, rs := range f.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) >= len(f.Sections) || f.Sections[rs.Info] != sec {
			continue
		}
		if syms == nil {
			var err error
			if syms, err = f.Symbols(); err != nil {
				return err
			}
		}
		rel, err := rs.Data()
		if err != nil {
			return err
		}
		for o := 0; o+24 <= len(rel); o += 24 {
			off := f.ByteOrder.Uint64(rel[o:])
			info := f.ByteOrder.Uint64(rel[o+8:])
			add := int64(f.ByteOrder.Uint64(rel[o+16:]))
			width := relocWidth(f.Machine, uint32(info))
			si := info >> 32
			if width == 0 || si == 0 || si > uint64(len(syms)) || off > uint64(len(data)) || uint64(width) > uint64(len(data))-off {
				continue
			}
			v := int64(syms[si-1].Value) + add // debug/elf drops the null symbol
			if pcrel {
				v -= int64(off)
			}
			if width == 4 {
				f.ByteOrder.PutUint32(data[off:], uint32(v))
			} else {
				f.ByteOrder.PutUint64(data[off:], uint64(v))
			}
		}
	}
	return nil
}

// relocWidth returns the field size of a PC-relative data relocation of
// the SFrame ABIs, or 0 for any other type.
func relocWidth(m elf.Machine, typ uint32) int {
	switch {
	case m == elf.EM_X86_64 && typ == uint32(elf.R_X86_64_PC32),
		m == elf.EM_AARCH64 && typ == uint32(elf.R_AARCH64_PREL32),
		m == elf.EM_S390 && typ == uint32(elf.R_390_PC32):
		return 4
	case m == elf.EM_X86_64 && typ == uint32(elf.R_X86_64_PC64),
		m == elf.EM_AARCH64 && typ == uint32(elf.R_AARCH64_PREL64),
		m == elf.EM_S390 && typ == uint32(elf.R_390_PC64):
		return 8
	}
	return 0
}

// readSegment reads the file bytes of the PT_GNU_SFRAME segment. io.ReadAll
// grows its buffer as bytes arrive, so a lying p_filesz cannot make us
// allocate more than the file holds. The segment can be larger than the
// section (zero padding up to the next alignment); it is trimmed to the
// header-derived size so that only the section is validated.
func readSegment(p *elf.Prog) ([]byte, error) {
	if p.Filesz > maxSection {
		return nil, fmt.Errorf("segment of %d bytes is too large", p.Filesz)
	}
	data, err := io.ReadAll(p.Open())
	if err != nil {
		return nil, err
	}
	if uint64(len(data)) != p.Filesz {
		return nil, errors.New("segment extends past the end of the file")
	}
	if n, ok := sectionSize(data); ok && n < uint64(len(data)) {
		data = data[:n]
	}
	return data, nil
}

// sectionSize returns the size the header implies (end of the FRE
// sub-section), if the header is readable at all. Parse reports the
// details when it is not.
func sectionSize(data []byte) (uint64, bool) {
	if len(data) < headerSize {
		return 0, false
	}
	var bo binary.ByteOrder
	switch {
	case data[0] == 0xe2 && data[1] == 0xde:
		bo = binary.LittleEndian
	case data[0] == 0xde && data[1] == 0xe2:
		bo = binary.BigEndian
	default:
		return 0, false
	}
	end := uint64(headerSize) + uint64(data[7]) + uint64(bo.Uint32(data[24:])) + uint64(bo.Uint32(data[16:]))
	return end, true
}
