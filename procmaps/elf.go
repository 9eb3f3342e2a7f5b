package procmaps

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"stacktop/regs"
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

// maxNoteBytes bounds how much of a note segment is read: a corrupt header
// must not make us allocate gigabytes.
const maxNoteBytes = 1 << 20

// BuildID returns the GNU build ID (NT_GNU_BUILD_ID) as lowercase hex, from
// the PT_NOTE segments or, failing that, the .note.gnu.build-id section. It
// returns "" and no error when the object has none.
func BuildID(f *elf.File) (string, error) {
	var firstErr error
	try := func(r io.Reader, size uint64, align uint64) (string, bool) {
		if size > maxNoteBytes {
			size = maxNoteBytes
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("procmaps: reading notes: %w", err)
			}
			return "", false
		}
		id, err := FindBuildIDNote(b, f.ByteOrder, align)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if id == nil {
			return "", false
		}
		return hex.EncodeToString(id), true
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if id, ok := try(p.Open(), p.Filesz, p.Align); ok {
			return id, nil
		}
	}
	if s := f.Section(".note.gnu.build-id"); s != nil && s.Type == elf.SHT_NOTE {
		if id, ok := try(s.Open(), s.Size, s.Addralign); ok {
			return id, nil
		}
	}
	return "", firstErr
}

// NoteError reports a malformed ELF note at a byte offset in its segment.
type NoteError struct {
	Off int
	Msg string
}

func (e *NoteError) Error() string {
	return fmt.Sprintf("procmaps: ELF note at offset %#x: %s", e.Off, e.Msg)
}

const ntGNUBuildID = 3

// FindBuildIDNote scans the bytes of a note segment for an NT_GNU_BUILD_ID
// note named "GNU" and returns its descriptor (nil if there is none). Notes
// are padded to 4 bytes, or to 8 in a segment aligned to 8 (which the
// toolchain uses for NT_GNU_PROPERTY_TYPE_0).
func FindBuildIDNote(b []byte, order binary.ByteOrder, align uint64) ([]byte, error) {
	pad := 4
	if align == 8 {
		pad = 8
	}
	up := func(n int) int { return (n + pad - 1) &^ (pad - 1) }
	off := 0
	for len(b)-off >= 12 {
		namesz := uint64(order.Uint32(b[off:]))
		descsz := uint64(order.Uint32(b[off+4:]))
		typ := order.Uint32(b[off+8:])
		rest := uint64(len(b) - off - 12)
		if namesz > rest || descsz > rest {
			return nil, &NoteError{Off: off, Msg: fmt.Sprintf("name size %d or descriptor size %d exceeds the %d bytes left", namesz, descsz, rest)}
		}
		// Padding is relative to the segment start, which is aligned.
		nameOff := off + 12
		descOff := up(nameOff + int(namesz))
		if uint64(descOff)+descsz > uint64(len(b)) {
			return nil, &NoteError{Off: off, Msg: "descriptor runs past the end"}
		}
		name := b[nameOff : nameOff+int(namesz)]
		if typ == ntGNUBuildID && string(name) == "GNU\x00" {
			if descsz == 0 {
				return nil, &NoteError{Off: off, Msg: "empty build ID"}
			}
			return append([]byte(nil), b[descOff:descOff+int(descsz)]...), nil
		}
		next := up(descOff + int(descsz))
		if next <= off || next > len(b) {
			break
		}
		off = next
	}
	return nil, nil
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
