package sframereport

import (
	"bytes"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/sframe"
)

var (
	amd64Hdr   = sframe.Header{Version: 3, Flags: 5, ABI: sframe.ABIAMD64LittleEndian, CFAFixedRAOffset: -8}
	arm64Hdr   = sframe.Header{Version: 3, Flags: 5, ABI: sframe.ABIAArch64LittleEndian}
	s390xHdrV2 = sframe.Header{Version: 2, Flags: 5, ABI: sframe.ABIS390XBigEndian}
	dflt       = sframe.Func{}
	flex       = sframe.Func{FDEType: sframe.FDETypeFlex}
)

func reg(r uint16, off int64) sframe.Rule {
	return sframe.Rule{Kind: sframe.RuleReg, Reg: r, Offset: off}
}
func dreg(r uint16, off int64) sframe.Rule {
	return sframe.Rule{Kind: sframe.RuleReg, Reg: r, Offset: off, Deref: true}
}
func slot(off int64) sframe.Rule { return sframe.Rule{Kind: sframe.RuleCFA, Offset: off, Deref: true} }

var fixedRA = sframe.Rule{Kind: sframe.RuleCFA, Offset: -8, Deref: true, Fixed: true}

func TestRowColumns(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    sframe.Header
		f    sframe.Func
		r    sframe.Row
		want string
	}{
		{"amd64 entry", amd64Hdr, dflt, sframe.Row{CFA: reg(7, 8), RA: fixedRA}, "sp+8 u f"},
		{"amd64 frame", amd64Hdr, dflt, sframe.Row{CFA: reg(6, 16), FP: slot(-16), RA: fixedRA}, "fp+16 c-16 f"},
		// sframe-dump prints default-FDE CFA offsets with "%s+%d".
		{"negative default CFA", amd64Hdr, dflt, sframe.Row{CFA: reg(6, -8), RA: fixedRA}, "fp+-8 u f"},
		{"arm64 leaf signed", arm64Hdr, dflt, sframe.Row{CFA: reg(31, 0), MangledRA: true}, "sp+0 u u[s]"},
		{"arm64 frame record", arm64Hdr, dflt, sframe.Row{CFA: reg(31, 16), FP: slot(-16), RA: slot(-8), MangledRA: true}, "sp+16 c-16 c-8[s]"},
		{"s390x entry", s390xHdrV2, dflt, sframe.Row{CFA: reg(15, 160)}, "sp+160 u u"},
		{"s390x FP without RA", s390xHdrV2, dflt, sframe.Row{CFA: reg(15, 160), FP: slot(-72), RA: sframe.Rule{Padding: true}}, "sp+160 c-72 U"},
		{"s390x V2 registers", s390xHdrV2, dflt, sframe.Row{CFA: reg(15, 160), FP: reg(16, 0), RA: reg(17, 0)}, "sp+160 r16 r17"},
		{"flex DRAP", amd64Hdr, flex, sframe.Row{CFA: dreg(6, -8), FP: slot(-16), RA: fixedRA}, "(fp-8) c-16 f"},
		{"flex other register", amd64Hdr, flex, sframe.Row{CFA: reg(10, 0), RA: fixedRA}, "r10+0 u f"},
		{"flex negative", amd64Hdr, flex, sframe.Row{CFA: reg(7, -8), RA: fixedRA}, "sp-8 u f"},
		{"flex RA padding", amd64Hdr, flex, sframe.Row{CFA: reg(7, 16), FP: slot(-16), RA: sframe.Rule{Kind: sframe.RuleCFA, Offset: -8, Deref: true, Fixed: true, Padding: true}}, "sp+16 c-16 U"},
		{"flex RA in register", amd64Hdr, flex, sframe.Row{CFA: reg(6, 16), FP: slot(-16), RA: reg(3, 0)}, "fp+16 c-16 r3+0"},
		{"flex RA same, fixed header", amd64Hdr, flex, sframe.Row{CFA: reg(7, 8)}, "sp+8 u f"},
		{"flex FP deref register", s390xHdrV2, flex, sframe.Row{CFA: reg(15, 160), FP: dreg(6, -8)}, "sp+160 (r6-8) u"},
	} {
		cfa, fp, ra, ok := rowColumns(tc.h, tc.f, tc.r)
		got := strings.Join([]string{cfa, fp, ra}, " ")
		if !ok || got != tc.want {
			t.Errorf("%s: got %q (ok %v), want %q", tc.name, got, ok, tc.want)
		}
	}
	if _, _, _, ok := rowColumns(amd64Hdr, dflt, sframe.Row{Outermost: true}); ok {
		t.Error("outermost row printed as columns")
	}
}

func TestWriteFunc(t *testing.T) {
	var b bytes.Buffer
	f := sframe.Func{Index: 3, Start: 0x4000b4, Size: 20, PCType: sframe.PCMask, Signal: true,
		FDEType: sframe.FDETypeFlex, PAuthKeyB: true}
	writeFunc(&b, arm64Hdr, f, []sframe.Row{
		{Start: 0, CFA: reg(31, 0), MangledRA: true},
		{Start: 4, Outermost: true},
	})
	want := "\n    func idx [3]: pc = 0x4000b4, size = 20 bytes, attr = \"SF\", pauth = B key" +
		"\n    STARTPC[m]      CFA       FP        RA           " +
		"\n    0000000000000000  sp+0      u         u[s]         " +
		"\n    0000000000000004  RA undefined\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	// pauth is an aarch64 notion only.
	b.Reset()
	writeFunc(&b, amd64Hdr, sframe.Func{PAuthKeyB: true}, nil)
	if strings.Contains(b.String(), "pauth") {
		t.Errorf("pauth printed for AMD64: %q", b.String())
	}
}

func TestHeaderFlags(t *testing.T) {
	for _, tc := range []struct {
		h    sframe.Header
		want string
	}{
		{sframe.Header{Version: 1}, "Flags: NONE"},
		{sframe.Header{Version: 2, Flags: 3}, "Flags: SFRAME_F_FDE_SORTED, SFRAME_F_FRAME_POINTER"},
		// FRAME_POINTER has no name in V3; the dumper prints residual bits as numbers.
		{sframe.Header{Version: 3, Flags: 7}, "Flags: SFRAME_F_FDE_SORTED, SFRAME_F_FDE_FUNC_START_PCREL, 2"},
	} {
		var b bytes.Buffer
		writeHeader(&b, ".sframe", tc.h)
		if got := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(got, tc.want+" Num FDEs") {
			t.Errorf("flags %#x v%d: %q lacks %q", tc.h.Flags, tc.h.Version, got, tc.want)
		}
	}
	var b bytes.Buffer
	writeHeader(&b, ".sframe", sframe.Header{Version: 3, CFAFixedFPOffset: -16})
	if !strings.Contains(b.String(), "CFA fixed FP offset: -16\n") || strings.Contains(b.String(), "fixed RA") {
		t.Errorf("fixed offsets: %q", b.String())
	}
}
