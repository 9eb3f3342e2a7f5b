package debuginfo

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"

	// The standard library has no xz decoder; this is a maintained
	// pure-Go one.
	"github.com/ulikunitz/xz"
)

// ErrNoMiniDebugInfo is returned when an object has no .gnu_debugdata.
var ErrNoMiniDebugInfo = errors.New("debuginfo: no .gnu_debugdata section")

// maxMiniDebugInfo bounds the decompressed size of .gnu_debugdata: a few
// hundred KiB in practice, so 64 MiB only stops decompression bombs.
const maxMiniDebugInfo = 64 << 20

// MiniDebugInfo decompresses f's .gnu_debugdata (Fedora's MiniDebugInfo:
// an xz-compressed ELF holding the .symtab of local functions that the
// stripped object lacks) and parses it as an ELF file.
func MiniDebugInfo(f *elf.File) (*elf.File, error) {
	sec := f.Section(".gnu_debugdata")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, ErrNoMiniDebugInfo
	}
	raw, err := sectionData(sec)
	if err != nil {
		return nil, &FormatError{".gnu_debugdata", -1, err}
	}
	return parseMiniDebugInfo(raw)
}

func parseMiniDebugInfo(raw []byte) (*elf.File, error) {
	zr, err := xz.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, &FormatError{".gnu_debugdata", -1, fmt.Errorf("xz: %w", err)}
	}
	img, err := io.ReadAll(io.LimitReader(zr, maxMiniDebugInfo+1))
	if err != nil {
		return nil, &FormatError{".gnu_debugdata", -1, fmt.Errorf("xz: %w", err)}
	}
	if len(img) > maxMiniDebugInfo {
		return nil, &FormatError{".gnu_debugdata", -1, fmt.Errorf("decompresses to more than %d bytes", maxMiniDebugInfo)}
	}
	ef, err := newELF(bytes.NewReader(img))
	if err != nil {
		return nil, &FormatError{".gnu_debugdata", -1, err}
	}
	return ef, nil
}
