package procmaps

import (
	"debug/elf"
	"errors"
	"fmt"

	"codeberg.org/stacktop/stacktop/regs"
)

// ArchOf maps an ELF header to the target architecture.
func ArchOf(f *elf.File) regs.Arch {
	switch {
	case f.Machine == elf.EM_X86_64 && f.Class == elf.ELFCLASS64:
		return regs.AMD64
	case f.Machine == elf.EM_AARCH64:
		return regs.ARM64
	case f.Machine == elf.EM_S390 && f.Class == elf.ELFCLASS64:
		return regs.S390X
	}
	return regs.ArchUnknown
}

// ErrNoLoad is returned by LoadBias when no PT_LOAD segment covers the
// mapping's file offset.
var ErrNoLoad = errors.New("procmaps: no PT_LOAD covers the mapping's file offset")

// LoadBias computes the load bias of an ELF object from one of its file
// mappings m, which maps file offset m.Offset at m.Start. With the PT_LOAD
// whose file range holds that offset (p_offset rounded down to the page,
// since mmap offsets are page-aligned),
//
//	bias = vm_start - offset + p_offset - p_vaddr
//
// so that runtime address = ELF virtual address + bias. A non-PIE ET_EXEC
// yields 0; the arithmetic wraps, as addresses do.
//
// When segments share a file page (links without -z separate-code, and the
// RELRO/data pair of nearly every object), more than one PT_LOAD holds the
// offset. The one whose PF_X agrees with the mapping's x bit wins, then the
// one whose rounded start is exactly the offset. That is exact for
// executable mappings, the ones the unwinder needs (two executable segments
// sharing a page do not occur in practice); for data mappings the answer
// may belong to the neighbouring segment.
func LoadBias(f *elf.File, m *Mapping, pageSize uint64) (uint64, error) {
	if pageSize == 0 || pageSize&(pageSize-1) != 0 {
		return 0, fmt.Errorf("procmaps: page size %d is not a power of two", pageSize)
	}
	best, bestScore := (*elf.Prog)(nil), -1
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Filesz == 0 {
			continue
		}
		lo := p.Off &^ (pageSize - 1)
		hi := p.Off + p.Filesz
		if hi < p.Off || m.Offset < lo || m.Offset >= hi { // (hi < p.Off: overflow in a corrupt header)
			continue
		}
		score := 0
		if (p.Flags&elf.PF_X != 0) == m.IsExec() {
			score += 2
		}
		if lo == m.Offset {
			score++
		}
		if score > bestScore {
			best, bestScore = p, score
		}
	}
	if best == nil {
		return 0, ErrNoLoad
	}
	return m.Start - m.Offset + best.Off - best.Vaddr, nil
}
