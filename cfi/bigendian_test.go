package cfi

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

const s390xFixtureAddr = 0x108a2e8 // testdata/README.md

func s390xFixture(t testing.TB) *Table {
	t.Helper()
	data, err := os.ReadFile("testdata/s390x-static.eh_frame")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Build(elf.EM_S390, Section{Name: ".eh_frame", Data: data, Addr: s390xFixtureAddr})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// Real s390x compiler output, big-endian: every FDE decodes, and
// spin_caller's rows are those readelf prints (stmg saves r14 at CFA-48
// and r15 at CFA-40, aghi grows the frame by 160, the epilogue restores).
func TestS390XFixture(t *testing.T) {
	tab := s390xFixture(t)
	fdes, rows, err := tab.DecodeAll()
	if err != nil || fdes < 500 || fdes != tab.Len() {
		t.Fatalf("decoded %d of %d FDEs, %d rows: %v", fdes, tab.Len(), rows, err)
	}
	const spinCaller = 0x1000b30
	for _, c := range []struct {
		pc       uint64
		cfa      int64
		raSaved  bool
		raOffset int64
	}{
		{spinCaller, 160, false, 0},
		{spinCaller + 0xa, 160, true, -48},
		{spinCaller + 0x10, 320, true, -48},
		{spinCaller + 0x2e, 160, false, 0},
	} {
		r, err := tab.Lookup(c.pc)
		if err != nil {
			t.Fatalf("%#x: %v", c.pc, err)
		}
		if r.CFA.Kind != RuleCFA || r.CFA.Reg != 15 || r.CFA.Offset != c.cfa || r.RAReg != 14 {
			t.Errorf("%#x: CFA %+v RA reg %d, want r15+%d, r14", c.pc, r.CFA, r.RAReg, c.cfa)
		}
		if c.raSaved && (r.RA.Kind != RuleOffset || r.RA.Offset != c.raOffset || r.Reg(15).Kind != RuleOffset || r.Reg(15).Offset != -40) {
			t.Errorf("%#x: RA %+v r15 %+v, want c%d and c-40", c.pc, r.RA, r.Reg(15), c.raOffset)
		}
		if !c.raSaved && r.RA.Kind != RuleUnspecified {
			t.Errorf("%#x: RA %+v, want unspecified (still in r14)", c.pc, r.RA)
		}
	}
	// Read as little-endian, the same bytes are garbage: the byte order
	// is what makes them decode.
	data, _ := os.ReadFile("testdata/s390x-static.eh_frame")
	if tab, err := Build(elf.EM_X86_64, Section{Name: ".eh_frame", Data: data, Addr: s390xFixtureAddr}); err == nil && tab.Len() > 0 {
		if n, _, err := tab.DecodeAll(); err == nil && n == fdes {
			t.Error("the s390x section decodes as little-endian too: the test shows nothing")
		}
	}
}

// TestS390XAgainstReadelf compares every row of every FDE of a fresh
// s390x build (glibc's FDEs included) with binutils' readelf.
func TestS390XAgainstReadelf(t *testing.T) {
	for _, tool := range []string{"s390x-linux-gnu-gcc", "s390x-linux-gnu-readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install gcc-s390x-linux-gnu)", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "tailcall-s390x")
	if out, err := exec.Command("s390x-linux-gnu-gcc", "-O2", "-static", "-pthread", "-o", bin, "../testdata/targets/tailcall.c", "../testdata/targets/tailcall_lib.c").CombinedOutput(); err != nil {
		t.Skipf("s390x-linux-gnu-gcc: %v\n%s", err, out) // no cross libc
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("s390x-linux-gnu-readelf", "--debug-dump=frames-interp", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	rows, checked := 0, 0
	for _, want := range s390xReadelfRows(t, out) {
		rows++
		got, err := tab.Lookup(want.loc)
		if err != nil {
			t.Errorf("%#x: %v", want.loc, err)
			continue
		}
		for col, v := range want.cols {
			var r Rule
			switch {
			case col == "CFA":
				if g := cfaString(got.CFA); g != v {
					t.Errorf("%#x: CFA %s, readelf %s", want.loc, g, v)
				}
				checked++
				continue
			case col == "ra":
				r = got.RA
			case strings.HasPrefix(col, "r"):
				n, err := strconv.Atoi(col[1:])
				if err != nil {
					continue
				}
				r = got.Reg(uint16(n))
			default:
				continue // FPRs (f8...) are beyond what the table keeps
			}
			if !ruleMatches(r, v) {
				t.Errorf("%#x: %s is %+v, readelf %q", want.loc, col, r, v)
			}
			checked++
		}
		if t.Failed() && rows > 20 {
			t.FailNow()
		}
	}
	if rows < 1000 {
		t.Errorf("only %d rows in readelf's output", rows)
	}
	t.Logf("%d FDEs, %d rows, %d rules compared with readelf", tab.Len(), rows, checked)
}

type s390xReadelfRow struct {
	loc  uint64
	cols map[string]string
}

// s390xReadelfRows reads readelf -wF's tables: a header naming the
// columns, then one line per row ("r16 (f0)" is one column).
func s390xReadelfRows(t *testing.T, out []byte) []s390xReadelfRow {
	var rows []s390xReadelfRow
	var header []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	inFDE := false
	for sc.Scan() {
		line := regRule.ReplaceAllString(sc.Text(), "$1")
		f := strings.Fields(line)
		switch {
		case strings.Contains(line, " FDE "):
			inFDE, header = true, nil
		case strings.Contains(line, " CIE "):
			inFDE, header = false, nil
		case inFDE && len(f) > 1 && f[0] == "LOC":
			header = f
		case inFDE && header != nil && len(f) == len(header):
			loc, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				continue
			}
			r := s390xReadelfRow{loc: loc, cols: map[string]string{}}
			for k := 1; k < len(f); k++ {
				r.cols[header[k]] = f[k]
			}
			rows = append(rows, r)
		}
	}
	return rows
}

func cfaString(r Rule) string {
	switch r.Kind {
	case RuleCFA:
		return fmt.Sprintf("r%d%+d", r.Reg, r.Offset)
	case RuleCFAExpression:
		return "exp"
	}
	return r.Kind.String()
}

// ruleMatches compares a rule with readelf's notation: u undefined (or
// never set), s same value, cN saved at CFA+N, vN value CFA+N, rN in
// register N, exp/vexp expressions.
func ruleMatches(r Rule, v string) bool {
	switch {
	case v == "" || v == "u":
		return r.Kind == RuleUnspecified || r.Kind == RuleUndefined
	case v == "s":
		return r.Kind == RuleSameValue || r.Kind == RuleUnspecified
	case v == "exp":
		return r.Kind == RuleExpression
	case v == "vexp":
		return r.Kind == RuleValExpression
	case v[0] == 'c':
		return r.Kind == RuleOffset && strconv.FormatInt(r.Offset, 10) == v[1:]
	case v[0] == 'v':
		return r.Kind == RuleValOffset && strconv.FormatInt(r.Offset, 10) == v[1:]
	case v[0] == 'r':
		return r.Kind == RuleRegister && strconv.Itoa(int(r.Reg)) == v[1:]
	}
	return false
}

// FuzzCFIBigEndian: the package's own CIE/FDE decoder (big-endian
// sections, .eh_frame and .debug_frame) never panics and never reads out
// of range; bad bytes are a *FormatError.
func FuzzCFIBigEndian(f *testing.F) {
	data, err := os.ReadFile("testdata/s390x-static.eh_frame")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:min(len(data), 4096)], false)
	f.Add([]byte{0, 0, 0, 0x14, 0xff, 0xff, 0xff, 0xff, 4, 0, 8, 0, 1, 0x78, 14, 0x0c, 15, 0xa0, 1, 0, 0, 0, 0, 0}, true)
	// Three FDEs, a bad opcode in the middle one; and an entry too short
	// for its CIE id.
	three, insns := ehFrameSection(binary.BigEndian, elf.EM_S390, 0x1000, 3)
	three[insns[1]+1] = 0x3f
	f.Add(three, false)
	short, _ := ehFrameSection(binary.BigEndian, elf.EM_S390, 0x1000, 2)
	binary.BigEndian.PutUint32(short[4+binary.BigEndian.Uint32(short):], 2)
	f.Add(short, false)
	f.Fuzz(func(t *testing.T, data []byte, debugFrame bool) {
		name := ".eh_frame"
		if debugFrame {
			name = ".debug_frame"
		}
		tab, err := Build(elf.EM_S390, Section{Name: name, Data: data, Addr: 0x1000})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *FormatError", err, err)
			}
			return
		}
		tab.DecodeAll()
		for i := range tab.fdes {
			if i > 64 {
				break
			}
			tab.Lookup(tab.fdes[i].start)
		}
	})
}

// A big-endian target's expression operands are swapped for delve's
// little-endian stack machine: DW_OP_const2u 0x0102; DW_OP_const4s -2;
// DW_OP_plus; DW_OP_breg15 +8; DW_OP_plus gives 0x0100 + r15 + 8.
func TestEvalBigEndianOperands(t *testing.T) {
	expr := []byte{0x0a, 0x01, 0x02, 0x0d, 0xff, 0xff, 0xff, 0xfe, 0x22, 0x7f, 0x08, 0x22}
	r := regs.Set{Arch: regs.S390X}
	r.Put(15, 0x10000)
	v, err := Eval(Rule{Kind: RuleCFAExpression, Expr: expr}, &r, 0, nil)
	if err != nil || v != 0x0102-2+0x10000+8 {
		t.Errorf("Eval = %#x, %v; want %#x", v, err, 0x0102-2+0x10000+8)
	}
	if _, err := littleEndianOperands([]byte{0x0c, 1, 2}); !errors.Is(err, ErrExpr) {
		t.Errorf("truncated operand: %v", err)
	}
	if _, err := littleEndianOperands([]byte{0xe0}); !errors.Is(err, ErrExpr) {
		t.Errorf("unknown opcode: %v", err)
	}
}

// ehFrameSection builds an .eh_frame in order: one CIE (CFA = sp+8 or
// s390x's r15+160) and n FDEs of 16 bytes of code each from 0x2000, each
// with "advance 1; def_cfa_offset 16". It returns the section and the
// section offsets of every FDE's instructions.
func ehFrameSection(order binary.ByteOrder, m elf.Machine, addr uint64, n int) ([]byte, []int) {
	sp, ra, cfa := byte(7), byte(16), []byte{8}
	if m == elf.EM_S390 {
		sp, ra, cfa = 15, 14, []byte{0xa0, 1} // ULEB128 160
	}
	var b []byte
	u32 := func(v uint32) { b = order.(binary.AppendByteOrder).AppendUint32(b, v) }
	// CIE: version 1, "zR", code 1, data -8, RA, aug length 1, pcrel|sdata4.
	cie := append([]byte{1, 'z', 'R', 0, 1, 0x78, ra, 1, 0x1b, 0x0c, sp}, cfa...)
	for len(cie)%4 != 0 {
		cie = append(cie, 0) // DW_CFA_nop
	}
	u32(uint32(4 + len(cie)))
	u32(0)
	b = append(b, cie...)
	var insns []int
	for i := 0; i < n; i++ {
		start := len(b)
		u32(4 + 4 + 4 + 1 + 7) // CIE pointer, begin, range, aug length, program (nop-padded)
		u32(uint32(len(b)))    // CIE pointer: back to offset 0
		u32(uint32(int32(0x2000 + 16*i - int(addr) - len(b))))
		u32(16)
		b = append(b, 0)
		insns = append(insns, len(b))
		b = append(b, 0x41, 0x0e, 0x10, 0, 0, 0, 0)
		if len(b)-start != 24 {
			panic("ehFrameSection: FDE size")
		}
	}
	u32(0) // terminator
	return b, insns
}

// An error in the program of an FDE that is not the section's last has the
// offset of that FDE's instructions, for both byte orders: big-endian
// sections through the package's own decoder (entries.go), little-endian
// through delve's and, checked here too, the own decoder.
func TestFormatErrorOffsetMiddleFDE(t *testing.T) {
	const addr = 0x1000
	for _, c := range []struct {
		name  string
		m     elf.Machine
		order binary.ByteOrder
		own   bool
	}{
		{"big-endian", elf.EM_S390, binary.BigEndian, true},
		{"little-endian, delve", elf.EM_X86_64, binary.LittleEndian, false},
		{"little-endian, own decoder", elf.EM_X86_64, binary.LittleEndian, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, insns := ehFrameSection(c.order, c.m, addr, 3)
			data[insns[1]+1] = 0x3f // not a CFA opcode, in the middle FDE
			sec := Section{Name: ".eh_frame", Data: data, Addr: addr}
			tab, err := Build(c.m)
			if err != nil {
				t.Fatal(err)
			}
			var fdes []parsedFDE
			if c.own {
				fdes, err = parseEntries(&sec, c.order)
			} else {
				fdes, err = parseDelve(&sec)
			}
			if err != nil || len(fdes) != 3 {
				t.Fatalf("parsed %d FDEs: %v", len(fdes), err)
			}
			for _, f := range fdes {
				tab.fdes = append(tab.fdes, fde{start: f.start, end: f.end, insns: f.insns, sec: f.sec, cie: f.cie})
			}
			for i, want := range insns {
				_, err := tab.Lookup(0x2000 + 16*uint64(i) + 2)
				if i != 1 {
					if err != nil {
						t.Errorf("FDE %d: %v", i, err)
					}
					continue
				}
				var fe *FormatError
				if !errors.As(err, &fe) || fe.Section != ".eh_frame" || fe.Offset != int64(want) {
					t.Errorf("FDE %d: %v, want a FormatError at %#x", i, err, want)
				}
			}
		})
	}
}

// An entry whose length cannot hold its CIE id is an error at the entry,
// not a read of the next entry's bytes.
func TestEntryShorterThanID(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.BigEndian, binary.LittleEndian} {
		data, _ := ehFrameSection(order, elf.EM_S390, 0x1000, 2)
		second := 4 + int(order.Uint32(data))
		order.PutUint32(data[second:], 2)
		_, err := parseEntries(&Section{Name: ".eh_frame", Data: data, Addr: 0x1000}, order)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Offset != int64(second) || !strings.Contains(fe.Msg, "CIE id") {
			t.Errorf("%v: %v, want a FormatError at %#x about the CIE id", order, err, second)
		}
	}
}
