// Package buildid reads the GNU build ID of an ELF object: the
// NT_GNU_BUILD_ID note that the linker writes and that debuginfo files,
// debuginfod servers and profiles use to name one build of a binary.
//
// It is a leaf: both the /proc package (to key its module cache) and
// debuginfo (to match separate debug files) use it without one importing
// the other. FindNote parses untrusted note bytes; a malformed note is a
// *NoteError carrying its offset, never a panic (FuzzFindNote).
package buildid

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
)

// maxNoteBytes bounds how much of a note segment is read: a corrupt header
// must not make us allocate gigabytes.
const maxNoteBytes = 1 << 20

// Read returns the GNU build ID (NT_GNU_BUILD_ID) as lowercase hex, from
// the PT_NOTE segments or, failing that, the .note.gnu.build-id section. It
// returns "" and no error when the object has none.
func Read(f *elf.File) (string, error) {
	var firstErr error
	try := func(r io.Reader, size uint64, align uint64) (string, bool) {
		if size > maxNoteBytes {
			size = maxNoteBytes
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("buildid: reading notes: %w", err)
			}
			return "", false
		}
		id, err := FindNote(b, f.ByteOrder, align)
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
	return fmt.Sprintf("buildid: ELF note at offset %#x: %s", e.Off, e.Msg)
}

const ntGNUBuildID = 3

// FindNote scans the bytes of a note segment for an NT_GNU_BUILD_ID
// note named "GNU" and returns its descriptor (nil if there is none). Notes
// are padded to 4 bytes, or to 8 in a segment aligned to 8 (which the
// toolchain uses for NT_GNU_PROPERTY_TYPE_0).
func FindNote(b []byte, order binary.ByteOrder, align uint64) ([]byte, error) {
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
