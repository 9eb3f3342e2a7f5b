package sframe

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// hide patches an ELF image: phdr turns PT_GNU_SFRAME into PT_NULL, sec
// renames .sframe and retypes SHT_GNU_SFRAME.
func hide(t *testing.T, img []byte, phdr, sec bool) *elf.File {
	t.Helper()
	b := append([]byte(nil), img...)
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	bo := f.ByteOrder
	phoff, shoff := bo.Uint64(b[0x20:]), bo.Uint64(b[0x28:])
	if phdr {
		for i := range f.Progs {
			o := phoff + uint64(i)*56
			if elf.ProgType(bo.Uint32(b[o:])) == ptGNUSFrame {
				bo.PutUint32(b[o:], uint32(elf.PT_NULL))
			}
		}
	}
	if sec {
		if i := bytes.Index(b, []byte(".sframe\x00")); i >= 0 {
			b[i+1] = 'x'
		}
		for i, s := range f.Sections {
			if s.Type == shtGNUSFrame {
				bo.PutUint32(b[shoff+uint64(i)*64+4:], uint32(elf.SHT_PROGBITS))
			}
		}
	}
	nf, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return nf
}

func TestFromELFFallbacks(t *testing.T) {
	path := filepath.Join("testdata", "x86_64-v3.exe")
	img, err := os.ReadFile(path)
	if err != nil {
		t.Skip("fixture missing:", err)
	}
	orig, err := FromELF(hide(t, img, false, false))
	if err != nil {
		t.Fatal(err)
	}
	// Without the segment the section header gives the same section.
	s, err := FromELF(hide(t, img, true, false))
	if err != nil {
		t.Fatal(err)
	}
	if s.Vaddr() != orig.Vaddr() || s.Header() != orig.Header() {
		t.Fatalf("section fallback: vaddr %#x header %+v, segment: %#x %+v", s.Vaddr(), s.Header(), orig.Vaddr(), orig.Header())
	}
	if _, err := FromELF(hide(t, img, true, true)); !errors.Is(err, ErrNoSFrame) {
		t.Fatalf("no segment, no section: %v, want ErrNoSFrame", err)
	}
	// With only the segment left, it is found and used.
	if s, err = FromELF(hide(t, img, false, true)); err != nil || s.Vaddr() != orig.Vaddr() {
		t.Fatalf("segment only: %v", err)
	}
}
