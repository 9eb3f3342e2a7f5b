package sframe

import (
	"errors"
	"testing"
)

// Real sections produced by binutils 2.46 (the x86-64 test cases of the
// simple-frame-rs corpus) with the readelf text for each. The first one is
// the byte-level example in the project's SFrame reference.

var v3Example = []byte{
	0xe2, 0xde, 0x03, 0x05, 0x03, 0x00, 0xf8, 0x00, 0x06, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x00, 0x00,
	0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00, 0xd4, 0xee, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0x10, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0xd4, 0xee, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0x08, 0x00, 0x00, 0x00, 0x37, 0x00, 0x00, 0x00, 0xbd, 0xef, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0x44, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf1, 0xef, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0xe3, 0xef, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0x0c, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0xdf, 0xef, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0x06, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x03, 0x08, 0x01, 0x03, 0x10, 0x05, 0x03, 0x20, 0x42, 0x03, 0x10, 0x43, 0x03, 0x08,
	0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x08, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x08,
	0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x08, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x10,
	0x06, 0x03, 0x18, 0x01, 0x00, 0x10, 0x00, 0x08, 0x00, 0x03, 0x10,
}

const v3ExampleGolden = `
    Version: SFRAME_VERSION_3
    CFA fixed RA offset: -8
    func idx [0]: pc = 0x1020, size = 16 bytes
    STARTPC         CFA       FP        RA           
    0000000000001020  sp+16     u         f            
    0000000000001026  sp+24     u         f            

    func idx [1]: pc = 0x1030, size = 8 bytes
    STARTPC[m]      CFA       FP        RA           
    0000000000000000  sp+16     u         f            

    func idx [2]: pc = 0x1129, size = 68 bytes
    STARTPC         CFA       FP        RA           
    0000000000001129  sp+8      u         f            
    000000000000112a  sp+16     u         f            
    000000000000112e  sp+32     u         f            
    000000000000116b  sp+16     u         f            
    000000000000116c  sp+8      u         f            

    func idx [3]: pc = 0x116d, size = 2 bytes
    STARTPC         CFA       FP        RA           
    000000000000116d  sp+8      u         f            

    func idx [4]: pc = 0x116f, size = 12 bytes
    STARTPC         CFA       FP        RA           
    000000000000116f  sp+8      u         f            

    func idx [5]: pc = 0x117b, size = 6 bytes
    STARTPC         CFA       FP        RA           
    000000000000117b  sp+8      u         f            
`

// Flex FDE with RA padding, a register-saved RA and an RA-undefined row.
var v3FlexRAUndefined = []byte{
	226, 222, 3, 5, 3, 0, 248, 0, 1, 0, 0, 0, 5, 0, 0, 0, 33, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0,
	164, 239, 255, 255, 255, 255, 255, 255, 7, 0, 0, 0, 0, 0, 0, 0,
	5, 0, 0, 1, 0, 0, 4, 57, 8, 1, 10, 57, 16, 0, 2, 240, 4, 10, 49, 16, 0, 2, 240, 5, 12, 49, 16,
	25, 0, 2, 240, 6, 0,
}

const v3FlexRAUndefinedGolden = `
    Version: SFRAME_VERSION_3
    CFA fixed RA offset: -8
    func idx [0]: pc = 0x401000, size = 7 bytes, attr = "F"
    STARTPC         CFA       FP        RA           
    0000000000401000  sp+8      u         f            
    0000000000401001  sp+16     c-16      U            
    0000000000401004  fp+16     c-16      U            
    0000000000401005  fp+16     c-16      r3+0         
    0000000000401006  RA undefined
`

// Flex FDE with a DRAP register CFA and dereferenced CFA/FP rules.
var v3FlexDRAP = []byte{
	226, 222, 3, 5, 3, 0, 248, 0, 1, 0, 0, 0, 6, 0, 0, 0, 41, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0,
	156, 239, 255, 255, 255, 255, 255, 255, 95, 0, 0, 0, 0, 0, 0, 0,
	6, 0, 0, 1, 0, 0, 4, 57, 8, 9, 4, 81, 0, 24, 10, 81, 0, 0, 51, 0, 26, 10, 51, 248, 0, 51, 0,
	82, 10, 81, 0, 0, 51, 0, 94, 10, 57, 8, 0, 51, 0,
}

const v3FlexDRAPGolden = `
    Version: SFRAME_VERSION_3
    CFA fixed RA offset: -8
    func idx [0]: pc = 0x401000, size = 95 bytes, attr = "F"
    STARTPC         CFA       FP        RA           
    0000000000401000  sp+8      u         f            
    0000000000401009  r10+0     u         f            
    0000000000401018  r10+0     (fp+0)    U            
    000000000040101a  (fp-8)    (fp+0)    U            
    0000000000401052  r10+0     (fp+0)    U            
    000000000040105e  sp+8      (fp+0)    U            
`

func TestV3ExampleBytes(t *testing.T) {
	s, err := Parse(v3Example, 0x2130)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Header()
	want := Header{Version: 3, Flags: FlagFDESorted | FlagFDEFuncStartPCRel, ABI: ABIAMD64LittleEndian,
		CFAFixedRAOffset: -8, NumFDEs: 6, NumFREs: 11, FRELen: 63, FDEOff: 0, FREOff: 96}
	if h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	// The digest's arithmetic: 0x2130 + 28 + (-4396) = 0x1020.
	f, _ := s.Func(0)
	if f.Start != 0x1020 || f.Size != 16 || f.NumFREs != 2 || f.PCType != PCInc {
		t.Fatalf("FDE 0 = %+v", f)
	}
	f1, _ := s.Func(1)
	if f1.Start != 0x1030 || f1.PCType != PCMask || f1.RepSize != 8 {
		t.Fatalf("FDE 1 = %+v", f1)
	}
	// FRE `00 03 08`: CFA = sp+8, RA at CFA-8 (fixed), FP unchanged.
	r, err := s.Lookup(0x1129)
	if err != nil {
		t.Fatal(err)
	}
	wantRow := Row{Start: 0x1129,
		CFA: Rule{Kind: RuleReg, Reg: 7, Offset: 8},
		RA:  Rule{Kind: RuleCFA, Offset: -8, Deref: true, Fixed: true},
		FP:  Rule{Kind: RuleSame}}
	if r != wantRow {
		t.Fatalf("Lookup(0x1129) = %+v, want %+v", r, wantRow)
	}
	// Between FDE 1 (ends 0x1038) and FDE 2 (0x1129): a gap.
	for _, pc := range []uint64{0, 0x101f, 0x1038, 0x1128, 0x1181, ^uint64(0)} {
		if _, err := s.Lookup(pc); !errors.Is(err, ErrNoFunc) {
			t.Errorf("Lookup(%#x) = %v, want ErrNoFunc", pc, err)
		}
	}
	checkGolden(t, "v3-example", s, v3ExampleGolden, nil)
}

func TestV3Flex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		vaddr  uint64
		golden string
	}{
		{"ra-undefined-flex", v3FlexRAUndefined, 4202560, v3FlexRAUndefinedGolden},
		{"esc-expr-drap", v3FlexDRAP, 4202568, v3FlexDRAPGolden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.data, tc.vaddr)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name, s, tc.golden, nil)
		})
	}
	// Spot-check the normalised rules behind the notation.
	s, _ := Parse(v3FlexDRAP, 4202568)
	r, err := s.Lookup(0x40101a)
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Start: 0x40101a,
		CFA: Rule{Kind: RuleReg, Reg: 6, Offset: -8, Deref: true},
		RA:  Rule{Kind: RuleCFA, Offset: -8, Deref: true, Fixed: true, Padding: true},
		FP:  Rule{Kind: RuleReg, Reg: 6, Deref: true}}
	if r != want {
		t.Fatalf("DRAP row = %+v, want %+v", r, want)
	}
	s, _ = Parse(v3FlexRAUndefined, 4202560)
	r, _ = s.Lookup(0x401005)
	if r.RA != (Rule{Kind: RuleReg, Reg: 3}) {
		t.Fatalf("register RA = %+v", r.RA)
	}
	r, _ = s.Lookup(0x401006)
	if !r.Outermost {
		t.Fatalf("RA-undefined row = %+v", r)
	}
}
