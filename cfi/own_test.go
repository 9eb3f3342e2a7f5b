package cfi

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// TestOwnDecoderMatchesDelve: on real little-endian objects (the C
// library, the Go toolchain's and this test's own binaries, and the test
// targets where built), the package's own CIE/FDE decoder finds the FDEs
// delve's parser finds: same ranges, programs and CIE headers, in the same
// order. Build uses the own decoder for every byte order; this is why it
// may.
func TestOwnDecoderMatchesDelve(t *testing.T) {
	var paths []string
	if p := libcPath(t); p != "" {
		paths = append(paths, p)
	}
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, exe)
	}
	more, _ := filepath.Glob(filepath.Join("..", "testdata", "targets", "bin", "*"))
	paths = append(paths, more...)
	checked := 0
	for _, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		if f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 {
			f.Close()
			continue
		}
		for _, name := range []string{".eh_frame", ".debug_frame"} {
			s := f.Section(name)
			if s == nil || s.Type == elf.SHT_NOBITS {
				continue
			}
			data, err := s.Data()
			if err != nil {
				t.Fatalf("%s %s: %v", p, name, err)
			}
			sec := Section{Name: name, Data: data, Addr: s.Addr}
			want, werr := parseDelve(&sec)
			got, gerr := parseEntries(&sec, binary.LittleEndian)
			if (werr == nil) != (gerr == nil) {
				t.Errorf("%s %s: delve: %v; own: %v", p, name, werr, gerr)
				continue
			}
			if werr != nil {
				continue
			}
			if len(got) != len(want) {
				t.Errorf("%s %s: %d FDEs, delve %d", p, name, len(got), len(want))
				continue
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.start != w.start || g.end != w.end || cap(g.insns) != cap(w.insns) || len(g.insns) != len(w.insns) ||
					g.cie.signal != w.cie.signal || g.cie.hdr.codeAlig != w.cie.hdr.codeAlig || g.cie.hdr.dataAlig != w.cie.hdr.dataAlig ||
					g.cie.hdr.raReg != w.cie.hdr.raReg || g.cie.hdr.aug != w.cie.hdr.aug ||
					len(g.cie.hdr.initial) != len(w.cie.hdr.initial) || cap(g.cie.hdr.initial) != cap(w.cie.hdr.initial) {
					t.Errorf("%s %s: FDE %d: own %+v (CIE %+v), delve %+v (CIE %+v)", p, name, i, g, g.cie.hdr, w, w.cie.hdr)
					break
				}
			}
			checked++
		}
		f.Close()
	}
	if checked == 0 {
		t.Skip("no little-endian object with CFI found")
	}
	t.Logf("%d sections checked", checked)
}

// parseDelve parses a little-endian section with delve's pkg/dwarf/frame,
// as Build did before its own decoder read every byte order, and keeps,
// per FDE, what running its program needs: the reference the own decoder
// is checked against.
func parseDelve(s *Section) ([]parsedFDE, error) {
	fdes, err := parse(s)
	if err != nil {
		return nil, err
	}
	cies := map[*frame.CommonInformationEntry]*cieInfo{}
	out := make([]parsedFDE, 0, len(fdes))
	for _, f := range fdes {
		if f.CIE == nil || f.End() <= f.Begin() || f.Begin() == 0 {
			continue // empty, or a function the linker discarded
		}
		ci := cies[f.CIE]
		if ci == nil {
			c := f.CIE
			ci = &cieInfo{signal: strings.ContainsRune(c.Augmentation, 'S'), hdr: cieHeader{
				codeAlig: c.CodeAlignmentFactor, dataAlig: c.DataAlignmentFactor, raReg: c.ReturnAddressRegister,
				initial: c.InitialInstructions, aug: c.Augmentation,
			}}
			cies[f.CIE] = ci
		}
		out = append(out, parsedFDE{start: f.Begin(), end: f.End(), insns: f.Instructions, sec: s, cie: ci})
	}
	return out, nil
}

// parse runs delve's parser over one whole section, turning a panic on
// hostile bytes into an error.
func parse(s *Section) (fdes frame.FrameDescriptionEntries, err error) {
	defer func() {
		if p := recover(); p != nil {
			fdes, err = nil, &FormatError{Section: s.Name, Offset: -1, Msg: fmt.Sprintf("parser failed: %v", p)}
		}
	}()
	data := s.Data[:len(s.Data):len(s.Data)] // so an FDE's offset is len-cap
	ehAddr := uint64(0)
	if s.Name == ".eh_frame" {
		ehAddr = s.Addr
		if ehAddr == 0 {
			// delve takes a zero address to mean .debug_frame; an
			// .eh_frame at 0 only occurs in relocatable objects.
			return nil, &FormatError{Section: s.Name, Offset: -1, Msg: "section at address 0"}
		}
	}
	fdes, err = frame.Parse(data, binary.LittleEndian, 0, 8, ehAddr)
	if err != nil {
		return nil, &FormatError{Section: s.Name, Offset: -1, Msg: err.Error()}
	}
	return fdes, nil
}
