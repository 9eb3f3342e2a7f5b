package sframe

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// This file checks Lookup against `readelf --sframe` output: it parses the
// golden text, looks up every row's PC (for PCMASK rows, the offset in every
// repetition block) and renders the returned Row in readelf's notation.

type goldenFunc struct {
	idx   int
	pc    uint64
	size  uint32
	mask  bool
	attrs string // attr = "..." value
	pauth bool
	rows  []goldenRow
}

type goldenRow struct {
	start       uint64
	cfa, fp, ra string
	raUndefined bool
	line        int
}

type golden struct {
	version          int
	flags            Flags
	fixedRA, fixedFP int // "CFA fixed RA/FP offset" lines, 0 when absent
	numFDEs, numFREs int
	hasHeader        bool // a "Num FDEs" line was seen
	funcs            []goldenFunc
}

var flagNames = map[string]Flags{
	"SFRAME_F_FDE_SORTED":           FlagFDESorted,
	"SFRAME_F_FRAME_POINTER":        FlagFramePointer,
	"SFRAME_F_FDE_FUNC_START_PCREL": FlagFDEFuncStartPCRel,
}

var (
	funcLine = regexp.MustCompile(`^func idx \[(\d+)\]: pc = 0x([0-9a-f]+), size = (\d+) bytes(.*)$`)
	attrRe   = regexp.MustCompile(`attr = "([A-Z]*)"`)
)

func parseGolden(text string) (*golden, error) {
	g := &golden{}
	sc := bufio.NewScanner(strings.NewReader(text))
	ln := 0
	var cur *goldenFunc
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Version: SFRAME_VERSION_"):
			g.version, _ = strconv.Atoi(strings.TrimPrefix(line, "Version: SFRAME_VERSION_"))
		case strings.HasPrefix(line, "CFA fixed RA offset:"):
			g.fixedRA, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "CFA fixed RA offset:")))
		case strings.HasPrefix(line, "CFA fixed FP offset:"):
			g.fixedFP, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "CFA fixed FP offset:")))
		case strings.HasPrefix(line, "Num FDEs:"):
			g.numFDEs, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Num FDEs:")))
			g.hasHeader = true
		case strings.HasPrefix(line, "Num FREs:"):
			g.numFREs, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Num FREs:")))
		case strings.HasPrefix(line, "Flags:") || strings.HasPrefix(line, "SFRAME_F_"):
			for _, name := range strings.FieldsFunc(strings.TrimPrefix(line, "Flags:"), func(r rune) bool { return r == ',' || r == ' ' }) {
				g.flags |= flagNames[name]
			}
		case strings.HasPrefix(line, "func idx"):
			m := funcLine.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: bad func line %q", ln, line)
			}
			idx, _ := strconv.Atoi(m[1])
			pc, _ := strconv.ParseUint(m[2], 16, 64)
			size, _ := strconv.ParseUint(m[3], 10, 32)
			f := goldenFunc{idx: idx, pc: pc, size: uint32(size), pauth: strings.Contains(m[4], "pauth = B key")}
			if a := attrRe.FindStringSubmatch(m[4]); a != nil {
				f.attrs = a[1]
			}
			g.funcs = append(g.funcs, f)
			cur = &g.funcs[len(g.funcs)-1]
		case strings.HasPrefix(line, "STARTPC"):
			if cur == nil {
				return nil, fmt.Errorf("line %d: STARTPC before a func line", ln)
			}
			cur.mask = strings.HasPrefix(line, "STARTPC[m]")
		case cur != nil && len(line) >= 16 && isHex(line[:16]):
			fs := strings.Fields(line)
			start, _ := strconv.ParseUint(fs[0], 16, 64)
			r := goldenRow{start: start, line: ln}
			switch {
			case len(fs) == 3 && fs[1] == "RA" && fs[2] == "undefined":
				r.raUndefined = true
			case len(fs) == 4:
				r.cfa, r.fp, r.ra = fs[1], fs[2], fs[3]
			default:
				return nil, fmt.Errorf("line %d: bad row %q", ln, line)
			}
			cur.rows = append(cur.rows, r)
		}
	}
	return g, sc.Err()
}

func isHex(s string) bool {
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}

// regName renders a DWARF register the way the 2.46 dumper does for flex
// rules: the ABI's SP and FP by name, others as rN.
func (s *Section) regName(reg uint16) string {
	switch reg {
	case s.spReg:
		return "sp"
	case s.fpReg:
		return "fp"
	}
	return fmt.Sprintf("r%d", reg)
}

func (s *Section) regRule(r Rule) string {
	t := fmt.Sprintf("%s%+d", s.regName(r.Reg), r.Offset)
	if r.Deref {
		return "(" + t + ")"
	}
	return t
}

// readelfRow renders a row as readelf prints it. v1Quirks applies binutils
// 2.40's dumper: the RA of an ABI with a fixed RA offset prints as "u".
func (s *Section) readelfRow(f Func, r Row, v1Quirks bool) (cfa, fp, ra string) {
	flex := f.FDEType == FDETypeFlex
	if flex {
		cfa = s.regRule(r.CFA)
	} else {
		name := "fp"
		if r.CFA.Reg == s.spReg {
			name = "sp"
		}
		cfa = fmt.Sprintf("%s+%d", name, r.CFA.Offset)
	}
	saved := func(x Rule) string {
		switch x.Kind {
		case RuleSame:
			return "u"
		case RuleCFA:
			return fmt.Sprintf("c%+d", x.Offset)
		}
		if flex {
			return s.regRule(x)
		}
		return fmt.Sprintf("r%d", x.Reg) // s390x V2 register word
	}
	fp = saved(r.FP)
	switch {
	case r.RA.Padding:
		ra = "U"
	case r.RA.Fixed && v1Quirks:
		ra = "u"
	case r.RA.Fixed:
		ra = "f"
	default:
		ra = saved(r.RA)
	}
	if r.MangledRA {
		ra += "[s]"
	}
	return cfa, fp, ra
}

// checkGolden verifies s against readelf text: every function line through
// Func, every row through Rows and through Lookup at its PC(s).
//
// relocSyms is set for relocatable objects whose golden came from a readelf
// older than 2.45, which prints the unrelocated start (0): FromELF resolves
// the relocations, so each start must instead be one of these symbol values,
// and the golden rows are rebased onto it.
func checkGolden(t *testing.T, name string, s *Section, text string, relocSyms map[uint64]bool) {
	t.Helper()
	g, err := parseGolden(text)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	h := s.Header()
	if g.hasHeader && (int(h.Version) != g.version || h.Flags != g.flags || int(h.NumFREs) != g.numFREs ||
		int(h.NumFDEs) != g.numFDEs || (g.version > 1 && int(h.CFAFixedRAOffset) != g.fixedRA) ||
		int(h.CFAFixedFPOffset) != g.fixedFP) {
		t.Errorf("%s: header %+v, golden version %d flags %#x fixed RA %d FP %d, %d FDEs, %d FREs",
			name, h, g.version, g.flags, g.fixedRA, g.fixedFP, g.numFDEs, g.numFREs)
	}
	if len(g.funcs) != s.NumFuncs() {
		t.Fatalf("%s: golden has %d functions, section %d", name, len(g.funcs), s.NumFuncs())
	}
	v1 := g.version == 1
	checked := 0
	for _, gf := range g.funcs {
		f, err := s.Func(gf.idx)
		if err != nil {
			t.Fatalf("%s: Func(%d): %v", name, gf.idx, err)
		}
		if relocSyms != nil {
			if !relocSyms[f.Start] {
				t.Errorf("%s: func %d starts at %#x, where the object has no function symbol", name, gf.idx, f.Start)
			}
			shift := f.Start - gf.pc
			gf.pc += shift
			for j := range gf.rows {
				if !gf.mask {
					gf.rows[j].start += shift
				}
			}
		}
		if f.Start != gf.pc || f.Size != gf.size || (f.PCType == PCMask) != gf.mask {
			t.Errorf("%s: func %d = start %#x size %d mask %v, golden %#x %d %v",
				name, gf.idx, f.Start, f.Size, f.PCType == PCMask, gf.pc, gf.size, gf.mask)
		}
		if f.PAuthKeyB != gf.pauth || f.Signal != strings.Contains(gf.attrs, "S") ||
			(f.FDEType == FDETypeFlex) != strings.Contains(gf.attrs, "F") {
			t.Errorf("%s: func %d attributes pauthB=%v signal=%v type=%d, golden attr %q pauth %v",
				name, gf.idx, f.PAuthKeyB, f.Signal, f.FDEType, gf.attrs, gf.pauth)
		}
		rows, err := s.Rows(f)
		if err != nil {
			t.Fatalf("%s: Rows(%d): %v", name, gf.idx, err)
		}
		if len(rows) != len(gf.rows) {
			t.Errorf("%s: func %d has %d rows, golden %d", name, gf.idx, len(rows), len(gf.rows))
			continue
		}
		for j, gr := range gf.rows {
			check := func(how string, r Row) {
				t.Helper()
				if r.Start != gr.start {
					t.Errorf("%s:%d %s: start %#x, golden %#x", name, gr.line, how, r.Start, gr.start)
				}
				if r.Outermost != gr.raUndefined {
					t.Errorf("%s:%d %s: outermost %v, golden %v", name, gr.line, how, r.Outermost, gr.raUndefined)
				}
				if gr.raUndefined {
					return
				}
				cfa, fp, ra := s.readelfRow(f, r, v1)
				if cfa != gr.cfa || fp != gr.fp || ra != gr.ra {
					t.Errorf("%s:%d %s: %s %s %s, golden %s %s %s", name, gr.line, how, cfa, fp, ra, gr.cfa, gr.fp, gr.ra)
				}
			}
			check("Rows", rows[j])
			// Every PC the row covers, up to a bound, goes through Lookup.
			var offs []uint64
			if gf.mask {
				block := s.blockSize(&f)
				end := uint64(f.Size)
				if j+1 < len(gf.rows) {
					block = min(block, gf.rows[j+1].start)
				}
				for base := uint64(0); base < end; base += s.blockSize(&f) {
					for o := gr.start; o < block && base+o < end; o++ {
						offs = append(offs, base+o)
					}
				}
			} else {
				end := gf.pc + uint64(gf.size)
				if j+1 < len(gf.rows) {
					end = gf.rows[j+1].start
				}
				for pc := gr.start; pc < end; pc++ {
					offs = append(offs, pc-gf.pc)
				}
			}
			for _, o := range offs {
				r, err := s.Lookup(gf.pc + o)
				if err != nil {
					// Two FDEs may cover the same PC (overlapping FDEs in
					// hand-written assembly); the later start wins.
					if fa, ferr := s.FuncAt(gf.pc + o); ferr == nil && fa.Index != f.Index {
						continue
					}
					t.Errorf("%s:%d Lookup(%#x): %v", name, gr.line, gf.pc+o, err)
					continue
				}
				if fa, _ := s.FuncAt(gf.pc + o); fa.Index != f.Index {
					continue
				}
				check(fmt.Sprintf("Lookup(%#x)", gf.pc+o), r)
				checked++
			}
		}
		// One byte past the function must not return this function's rows.
		if fa, err := s.FuncAt(gf.pc + uint64(gf.size)); err == nil && fa.Index == f.Index {
			t.Errorf("%s: FuncAt(end of func %d) returned it", name, gf.idx)
		} else if err != nil && !errors.Is(err, ErrNoFunc) {
			t.Errorf("%s: FuncAt(end of func %d): %v", name, gf.idx, err)
		}
	}
	t.Logf("%s: %d functions, %d lookups checked", name, len(g.funcs), checked)
}
