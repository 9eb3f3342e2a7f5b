package debuginfo

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// DebugLink is the content of a .gnu_debuglink section: the file name of
// the separate debug file and the CRC32 (IEEE, as gdb computes it) of its
// whole contents.
type DebugLink struct {
	Name  string
	CRC32 uint32
}

// FormatError reports debugging data that could not be decoded.
type FormatError struct {
	Section string // ".gnu_debuglink", ".debug_info", ...
	Offset  int64  // byte offset in the section, -1 when unknown
	Err     error
}

func (e *FormatError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("debuginfo: %s: %v", e.Section, e.Err)
	}
	return fmt.Sprintf("debuginfo: %s at offset %#x: %v", e.Section, e.Offset, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// ErrNoDebugLink is returned when an object has no .gnu_debuglink.
var ErrNoDebugLink = errors.New("debuginfo: no .gnu_debuglink section")

// ParseDebugLink decodes the bytes of a .gnu_debuglink section: a
// NUL-terminated file name, zero padding to a 4-byte boundary, then the
// CRC32 in the object's byte order.
func ParseDebugLink(b []byte, order binary.ByteOrder) (DebugLink, error) {
	nul := bytes.IndexByte(b, 0)
	if nul < 0 {
		return DebugLink{}, &FormatError{".gnu_debuglink", int64(len(b)), errors.New("file name not NUL-terminated")}
	}
	if nul == 0 {
		return DebugLink{}, &FormatError{".gnu_debuglink", 0, errors.New("empty file name")}
	}
	name := string(b[:nul])
	if bytes.ContainsRune(b[:nul], '/') {
		// The link names a file in known directories; a path could
		// point the lookup anywhere.
		return DebugLink{}, &FormatError{".gnu_debuglink", 0, fmt.Errorf("file name %q contains a slash", name)}
	}
	off := (nul + 4) &^ 3
	if off+4 > len(b) {
		return DebugLink{}, &FormatError{".gnu_debuglink", int64(off), fmt.Errorf("CRC32 truncated: section is %d bytes", len(b))}
	}
	return DebugLink{Name: name, CRC32: order.Uint32(b[off:])}, nil
}

// ReadDebugLink reads f's .gnu_debuglink, or returns ErrNoDebugLink.
func ReadDebugLink(f *elf.File) (DebugLink, error) {
	sec := f.Section(".gnu_debuglink")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return DebugLink{}, ErrNoDebugLink
	}
	b, err := sectionData(sec)
	if err != nil {
		return DebugLink{}, &FormatError{".gnu_debuglink", -1, err}
	}
	return ParseDebugLink(b, f.ByteOrder)
}

// maxSectionSize bounds what is read of one section so that a header
// claiming terabytes cannot exhaust memory.
const maxSectionSize = 1 << 30

func sectionData(sec *elf.Section) (b []byte, err error) {
	if sec.Size > maxSectionSize {
		return nil, fmt.Errorf("section %s is %d bytes, more than the %d allowed", sec.Name, sec.Size, maxSectionSize)
	}
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("debug/elf panicked reading %s: %v", sec.Name, p)
		}
	}()
	return sec.Data()
}

// CRC32 computes the debuglink checksum of r's contents.
func CRC32(r io.Reader) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, r); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}
