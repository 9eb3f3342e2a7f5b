package sframe

import (
	"errors"
	"testing"
)

type encCase struct {
	name string
	sec  tSection
}

var (
	same    = Rule{Kind: RuleSame}
	padding = Rule{Kind: RuleSame, Padding: true}
)

func regRule(reg uint16, off int64) Rule { return Rule{Kind: RuleReg, Reg: reg, Offset: off} }
func slot(off int64) Rule                { return Rule{Kind: RuleCFA, Offset: off, Deref: true} }
func fixedSlot(off int64) Rule           { return Rule{Kind: RuleCFA, Offset: off, Deref: true, Fixed: true} }

// abiFuncs returns functions exercising every default-FDE row shape of an
// ABI, with the rows a correct decoder must produce.
func abiFuncs(abi ABI, version uint8) []tFDE {
	sp, fp := abiRegs(abi)
	outer := tFRE{Start: 6, Want: Row{Outermost: true}}
	switch abi {
	case ABIAMD64LittleEndian:
		ra := fixedSlot(-8)
		return []tFDE{
			{Start: 0x1000, Size: 0x20, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{8}, Want: Row{CFA: regRule(sp, 8), RA: ra, FP: same}},
				{Start: 1, SP: true, Words: []int64{16, -16}, Want: Row{CFA: regRule(sp, 16), RA: ra, FP: slot(-16)}},
				{Start: 4, Words: []int64{16, -16}, Want: Row{CFA: regRule(fp, 16), RA: ra, FP: slot(-16)}},
				{Start: 0x1e, SP: true, Words: []int64{8, -16}, Want: Row{CFA: regRule(sp, 8), RA: ra, FP: slot(-16)}},
			}},
			// Lazy PLT: PCMASK, block 16, row change at +11.
			{Start: 0x1040, Size: 0x40, FREType: -1, PCMask: true, Rep: 16, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{8}, Want: Row{CFA: regRule(sp, 8), RA: ra, FP: same}},
				{Start: 11, SP: true, Words: []int64{16}, Want: Row{CFA: regRule(sp, 16), RA: ra, FP: same}},
			}},
			// ADDR2 starts, 2- and 4-byte words.
			{Start: 0x2000, Size: 0x300, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{8}, Want: Row{CFA: regRule(sp, 8), RA: ra, FP: same}},
				{Start: 0x200, SP: true, Words: []int64{1000, -16}, Want: Row{CFA: regRule(sp, 1000), RA: ra, FP: slot(-16)}},
				{Start: 0x2ff, SP: true, Words: []int64{100000}, Want: Row{CFA: regRule(sp, 100000), RA: ra, FP: same}},
			}},
			// ADDR4 starts.
			{Start: 0x10000, Size: 0x10010, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{8}, Want: Row{CFA: regRule(sp, 8), RA: ra, FP: same}},
				{Start: 0x10000, SP: true, Words: []int64{16}, Want: Row{CFA: regRule(sp, 16), RA: ra, FP: same}},
			}},
			// _start: the last row is RA undefined. The first row starts
			// at 2, so [0,2) has no row.
			{Start: 0x30000, Size: 8, FREType: -1, FREs: []tFRE{
				{Start: 2, SP: true, Words: []int64{8}, Want: Row{CFA: regRule(sp, 8), RA: ra, FP: same}},
				outer,
			}},
		}
	case ABIAArch64BigEndian, ABIAArch64LittleEndian:
		return []tFDE{
			{Start: 0x400000, Size: 0x20, FREType: -1, PAuthB: true, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{0}, Want: Row{CFA: regRule(sp, 0), RA: same, FP: same}},
				{Start: 4, SP: true, Mangled: true, Words: []int64{0}, Want: Row{CFA: regRule(sp, 0), RA: same, FP: same}},
				{Start: 8, SP: true, Mangled: true, Words: []int64{16, -8, -16}, Want: Row{CFA: regRule(sp, 16), RA: slot(-8), FP: slot(-16)}},
				{Start: 0xc, Words: []int64{16, -8, -16}, Want: Row{CFA: regRule(fp, 16), RA: slot(-8), FP: slot(-16)}},
				{Start: 0x10, SP: true, Words: []int64{16, -8}, Want: Row{CFA: regRule(sp, 16), RA: slot(-8), FP: same}},
			}},
			{Start: 0x400100, Size: 0x1000, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{144, -136, -144}, Want: Row{CFA: regRule(sp, 144), RA: slot(-136), FP: slot(-144)}},
				{Start: 0xff0, SP: true, Words: []int64{70000, -8, -16}, Want: Row{CFA: regRule(sp, 70000), RA: slot(-8), FP: slot(-16)}},
			}},
			{Start: 0x402000, Size: 8, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{0}, Want: Row{CFA: regRule(sp, 0), RA: same, FP: same}},
				outer,
			}},
		}
	case ABIS390XBigEndian:
		// Register-saved RA/FP words exist in V2 only; V3 reads the same
		// odd words as plain offsets.
		regRA, regFP := slot(33), slot(35)
		if version == 2 {
			regRA, regFP = regRule(16, 0), regRule(17, 0)
		}
		return []tFDE{
			{Start: 0x1000000, Size: 0x40, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{0}, Want: Row{CFA: regRule(sp, 160), RA: same, FP: same}},
				{Start: 6, SP: true, Words: []int64{20, -48, -72}, Want: Row{CFA: regRule(sp, 320), RA: slot(-48), FP: slot(-72)}},
				{Start: 0xa, SP: true, Words: []int64{20, 0, -72}, Want: Row{CFA: regRule(sp, 320), RA: padding, FP: slot(-72)}},
				{Start: 0xe, Words: []int64{20, -48}, Want: Row{CFA: regRule(fp, 320), RA: slot(-48), FP: same}},
				{Start: 0x12, SP: true, Words: []int64{0, 33, 35}, Want: Row{CFA: regRule(sp, 160), RA: regRA, FP: regFP}},
				{Start: 0x16, SP: true, Words: []int64{-2}, Want: Row{CFA: regRule(sp, 144), RA: same, FP: same}},
			}},
			{Start: 0x1000100, Size: 8, FREType: -1, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{0}, Want: Row{CFA: regRule(sp, 160), RA: same, FP: same}},
				outer,
			}},
		}
	}
	panic("abi")
}

// encoderCases is every version/flag convention crossed with every ABI.
func encoderCases() []encCase {
	type conv struct {
		name    string
		version uint8
		flags   Flags
	}
	convs := []conv{
		{"v1", 1, FlagFDESorted},
		{"v2-secrel", 2, FlagFDESorted},
		{"v2-pcrel", 2, FlagFDESorted | FlagFDEFuncStartPCRel},
		{"v3", 3, FlagFDESorted | FlagFDEFuncStartPCRel},
	}
	abis := []struct {
		name string
		abi  ABI
		fix  int8
	}{
		{"amd64", ABIAMD64LittleEndian, -8},
		{"arm64le", ABIAArch64LittleEndian, 0},
		{"arm64be", ABIAArch64BigEndian, 0},
		{"s390x", ABIS390XBigEndian, 0},
	}
	var cases []encCase
	for _, c := range convs {
		for _, a := range abis {
			sec := tSection{Version: c.version, Flags: c.flags, ABI: a.abi, FixRA: a.fix,
				Vaddr: 0x7000, FDEs: abiFuncs(a.abi, c.version)}
			if c.version == 1 {
				for i := range sec.FDEs {
					sec.FDEs[i].Rep = 0 // V1 has no block size field
				}
			}
			cases = append(cases, encCase{c.name + "-" + a.name, sec})
		}
	}
	// Flex and signal FDEs (V3), FRE blocks out of FDE order, trailing
	// padding and an auxiliary header.
	sp, fp := abiRegs(ABIAMD64LittleEndian)
	flex := tSection{Version: 3, Flags: FlagFDESorted | FlagFDEFuncStartPCRel, ABI: ABIAMD64LittleEndian,
		FixRA: -8, Vaddr: 0x5000, ReverseFREs: true, Pad: 34, Aux: []byte{1, 2, 3},
		FDEs: []tFDE{
			{Start: 0x1000, Size: 0x40, FREType: -1, Flex: true, FREs: []tFRE{
				{Start: 0, Words: []int64{0x39, 8}, Want: Row{CFA: regRule(sp, 8), RA: fixedSlot(-8), FP: same}},
				{Start: 4, Words: []int64{0x51, 0}, Want: Row{CFA: regRule(10, 0), RA: fixedSlot(-8), FP: same}},
				{Start: 8, Words: []int64{0x33, -8, 0, 0x33, 0}, Want: Row{CFA: Rule{Kind: RuleReg, Reg: fp, Offset: -8, Deref: true},
					RA: Rule{Kind: RuleCFA, Offset: -8, Deref: true, Fixed: true, Padding: true}, FP: Rule{Kind: RuleReg, Reg: fp, Deref: true}}},
				{Start: 0xc, Words: []int64{0x31, 16, 0x19, 0, 0x02, -16}, Want: Row{CFA: regRule(fp, 16), RA: regRule(3, 0), FP: slot(-16)}},
				{Start: 0x10, Words: []int64{0x39, 16, 0x02, -8}, Want: Row{CFA: regRule(sp, 16), RA: slot(-8), FP: same}},
				{Start: 0x20, Want: Row{Outermost: true}},
			}},
			{Start: 0x1100, Size: 0x10, FREType: -1, Signal: true},
			{Start: 0x1200, Size: 0x10, FREType: -1, Signal: true, FREs: []tFRE{
				{Start: 0, SP: true, Words: []int64{8}, Want: Row{CFA: regRule(sp, 8), RA: fixedSlot(-8), FP: same}},
			}},
		}}
	cases = append(cases, encCase{"v3-flex-signal", flex})
	return cases
}

// wantLookup is the reference model: a linear scan over the test FDEs.
func wantLookup(t *tSection, pc uint64) (Row, error) {
	for _, f := range t.FDEs {
		if pc < f.Start || pc-f.Start >= uint64(f.Size) {
			continue
		}
		off := pc - f.Start
		if f.PCMask {
			rep := uint64(f.Rep)
			if rep == 0 {
				rep = 16
			}
			off %= rep
		}
		var hit *tFRE
		for j := range f.FREs {
			if uint64(f.FREs[j].Start) <= off {
				hit = &f.FREs[j]
			}
		}
		if hit == nil {
			return Row{}, ErrNoRow
		}
		r := hit.Want
		r.Start = uint64(hit.Start)
		if !f.PCMask {
			r.Start += f.Start
		}
		r.Signal, r.MangledRA = f.Signal, hit.Mangled
		return r, nil
	}
	return Row{}, ErrNoFunc
}

func TestEncodedSections(t *testing.T) {
	for _, tc := range encoderCases() {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := tc.sec.encode()
			s, err := Parse(b, tc.sec.Vaddr)
			if err != nil {
				t.Fatal(err)
			}
			if s.NumFuncs() != len(tc.sec.FDEs) {
				t.Fatalf("NumFuncs = %d", s.NumFuncs())
			}
			checked := 0
			for i, tf := range tc.sec.FDEs {
				f, err := s.Func(i)
				if err != nil {
					t.Fatal(err)
				}
				if f.Start != tf.Start || f.Size != tf.Size || int(f.NumFREs) != len(tf.FREs) ||
					(f.PCType == PCMask) != tf.PCMask || f.PAuthKeyB != tf.PAuthB || f.Signal != tf.Signal ||
					(f.FDEType == FDETypeFlex) != tf.Flex {
					t.Errorf("Func(%d) = %+v, encoded %+v", i, f, tf)
				}
				rows, err := s.Rows(f)
				if err != nil {
					t.Fatal(err)
				}
				for j, r := range rows {
					want, _ := wantLookup(&tc.sec, tf.Start+uint64(tf.FREs[j].Start))
					if !tf.PCMask && r != want {
						t.Errorf("Rows(%d)[%d] = %+v, want %+v", i, j, r, want)
					}
				}
				// Every byte of small functions, a stride through large ones,
				// and the bytes around both ends.
				step := uint64(1)
				if tf.Size > 0x400 {
					step = 0xff
				}
				pcs := []uint64{tf.Start - 1, tf.Start + uint64(tf.Size), tf.Start + uint64(tf.Size) - 1}
				for o := uint64(0); o < uint64(tf.Size); o += step {
					pcs = append(pcs, tf.Start+o)
				}
				for _, fr := range tf.FREs {
					pcs = append(pcs, tf.Start+uint64(fr.Start), tf.Start+uint64(fr.Start)-1)
				}
				for _, pc := range pcs {
					want, werr := wantLookup(&tc.sec, pc)
					got, err := s.Lookup(pc)
					if !errors.Is(err, werr) || (werr == nil) != (err == nil) || (werr == nil && got != want) {
						t.Errorf("Lookup(%#x) = %+v, %v; want %+v, %v", pc, got, err, want, werr)
					}
					checked++
				}
			}
			t.Logf("%d lookups", checked)
		})
	}
}

// An unsorted table (FDE_SORTED clear) is indexed once by Parse; the same
// table flagged sorted is corrupt.
func TestUnsortedTable(t *testing.T) {
	for _, tc := range encoderCases() {
		sec := tc.sec
		n := len(sec.FDEs)
		sec.FDEs = append([]tFDE(nil), sec.FDEs...)
		for i := 0; i < n/2; i++ {
			sec.FDEs[i], sec.FDEs[n-1-i] = sec.FDEs[n-1-i], sec.FDEs[i]
		}
		b, l := sec.encode()
		if _, err := Parse(b, sec.Vaddr); err == nil {
			t.Errorf("%s: reversed table flagged sorted parsed", tc.name)
		} else if fe := (*FormatError)(nil); !errors.As(err, &fe) || fe.Off != int64(l.fde[1]) {
			t.Errorf("%s: error %v, want offset %#x", tc.name, err, l.fde[1])
		}
		sec.Flags &^= FlagFDESorted
		b, _ = sec.encode()
		s, err := Parse(b, sec.Vaddr)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, tf := range sec.FDEs {
			if f, _ := s.Func(i); f.Start != tf.Start {
				t.Errorf("%s: Func(%d) keeps table order: start %#x, want %#x", tc.name, i, f.Start, tf.Start)
			}
			for o := uint64(0); o < uint64(tf.Size) && o < 0x100; o++ {
				want, werr := wantLookup(&sec, tf.Start+o)
				got, err := s.Lookup(tf.Start + o)
				if !errors.Is(err, werr) || (werr == nil && got != want) {
					t.Errorf("%s: Lookup(%#x) = %+v, %v; want %+v, %v", tc.name, tf.Start+o, got, err, want, werr)
				}
			}
		}
	}
}

func TestSignalFDEWithoutRows(t *testing.T) {
	var sec tSection
	for _, tc := range encoderCases() {
		if tc.name == "v3-flex-signal" {
			sec = tc.sec
		}
	}
	b, _ := sec.encode()
	s, err := Parse(b, sec.Vaddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(0x1104); !errors.Is(err, ErrNoRow) || !errors.Is(err, ErrNoFunc) {
		t.Fatalf("Lookup in a 0-FRE signal FDE: %v, want ErrNoRow (an ErrNoFunc)", err)
	}
	f, err := s.FuncAt(0x1104)
	if err != nil || !f.Signal || f.NumFREs != 0 {
		t.Fatalf("FuncAt = %+v, %v", f, err)
	}
	r, err := s.Lookup(0x1204)
	if err != nil || !r.Signal {
		t.Fatalf("signal FDE row = %+v, %v", r, err)
	}
	if _, err := s.Func(3); err == nil {
		t.Fatal("Func(3) of 3 succeeded")
	}
	if _, err := s.Rows(Func{Index: -1}); err == nil {
		t.Fatal("Rows of a bogus Func succeeded")
	}
}
