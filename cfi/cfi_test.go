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
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// testBinaries are real objects whose CFI is compared with readelf's.
func testBinaries(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, v := range []string{"chains-sframe2", "chains-fp", "chains-sframe3"} {
		out = append(out, filepath.Join("..", "testdata", "targets", "bin", v))
	}
	if p := libcPath(t); p != "" {
		out = append(out, p)
	}
	return out
}

func libcPath(t testing.TB) string {
	if runtime.GOARCH != "amd64" {
		return ""
	}
	b, err := exec.Command("gcc", "-print-file-name=libc.so.6").Output()
	if err != nil {
		return ""
	}
	p, err := filepath.EvalSymlinks(strings.TrimSpace(string(b)))
	if err != nil {
		return ""
	}
	return p
}

func load(t testing.TB, path string) *Table {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tab, err := Load(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tab
}

// readelfRow is one row of readelf --debug-dump=frames-interp.
type readelfRow struct {
	loc, next uint64            // next: the following row's LOC or the FDE end
	cfa       string            // "rsp+8", "r10+0", "exp"
	cols      map[string]string // register name -> "u", "c-16", "exp", "s", ...
}

// readelfRows parses readelf's interpreted CFI of the .eh_frame of path.
func readelfRows(t *testing.T, path string) []readelfRow {
	t.Helper()
	// readelf exits 1 over warnings about sections it does not need
	// (libc's separate debug link); its output is still complete.
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", path).Output()
	if len(out) == 0 {
		t.Skipf("readelf: %v", err)
	}
	var rows []readelfRow
	var header []string
	var fdeEnd uint64
	inFDE := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// A register rule prints as "r9 (r9)": one column, two fields.
		line := regRule.ReplaceAllString(sc.Text(), "$1")
		f := strings.Fields(line)
		switch {
		case strings.Contains(line, " FDE cie="):
			if strings.Contains(line, "Contents of the .debug_frame") {
				return rows
			}
			i := strings.Index(line, "pc=")
			rng := strings.SplitN(line[i+3:], "..", 2)
			fdeEnd, _ = strconv.ParseUint(strings.TrimSpace(rng[1]), 16, 64)
			inFDE, header = true, nil
		case strings.Contains(line, " CIE "):
			inFDE = false
		case strings.HasPrefix(line, "Contents of the .debug_frame"):
			return rows // .eh_frame only: what Load puts first
		case inFDE && len(f) > 1 && f[0] == "LOC":
			header = f
		case inFDE && header != nil && len(f) == len(header):
			loc, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				continue
			}
			if n := len(rows); n > 0 && rows[n-1].next == 0 {
				rows[n-1].next = loc
			}
			r := readelfRow{loc: loc, cfa: f[1], cols: map[string]string{}}
			for i := 2; i < len(f); i++ {
				r.cols[header[i]] = f[i]
			}
			rows = append(rows, r)
		case inFDE && len(f) == 0:
			if n := len(rows); n > 0 && rows[n-1].next == 0 {
				rows[n-1].next = fdeEnd
			}
			inFDE, header = false, nil
		}
	}
	if n := len(rows); n > 0 && rows[n-1].next == 0 {
		rows[n-1].next = fdeEnd
	}
	return rows
}

var regRule = regexp.MustCompile(`\b(r[0-9]+) \([a-z0-9]+\)`)

var amd64Names = map[string]uint16{"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6,
	"rsp": 7, "r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15, "ra": 16, "rip": 16}

// readelfNotation renders a rule as readelf's frames-interp does.
func readelfNotation(r Rule, cfa bool) string {
	name := func(n uint16) string {
		for k, v := range amd64Names {
			if v == n && k != "ra" && k != "rip" {
				return k
			}
		}
		return fmt.Sprintf("r%d", n)
	}
	switch r.Kind {
	case RuleUnspecified, RuleUndefined:
		return "u"
	case RuleSameValue:
		return "s"
	case RuleOffset:
		return fmt.Sprintf("c%+d", r.Offset)
	case RuleValOffset:
		return fmt.Sprintf("v%+d", r.Offset)
	case RuleRegister:
		return fmt.Sprintf("r%d", r.Reg)
	case RuleExpression, RuleCFAExpression:
		return "exp"
	case RuleValExpression:
		return "vexp"
	case RuleCFA:
		return fmt.Sprintf("%s%+d", name(r.Reg), r.Offset)
	}
	return "?"
}

// TestMatchesReadelf compares the rules at the first and last address of
// every row readelf prints (CFA, RA and each register column) for the
// targets and libc.
func TestMatchesReadelf(t *testing.T) {
	for _, path := range testBinaries(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tab := load(t, path)
			rows := readelfRows(t, path)
			if len(rows) < 10 {
				t.Fatalf("only %d readelf rows parsed", len(rows))
			}
			bad := 0
			for _, want := range rows {
				for _, pc := range []uint64{want.loc, want.next - 1} {
					got, err := tab.Lookup(pc)
					if err != nil {
						t.Errorf("%#x: %v", pc, err)
						bad++
						continue
					}
					diff := ""
					if g := readelfNotation(got.CFA, true); g != want.cfa {
						diff += fmt.Sprintf(" cfa %s want %s;", g, want.cfa)
					}
					for name, w := range want.cols {
						n, ok := amd64Names[name]
						if !ok {
							continue
						}
						r := got.RA
						if n != 16 {
							r = got.Reg(n)
						}
						if g := readelfNotation(r, false); g != w {
							diff += fmt.Sprintf(" %s %s want %s;", name, g, w)
						}
					}
					if diff != "" {
						t.Errorf("%#x:%s", pc, diff)
						bad++
					}
					if bad > 20 {
						t.Fatal("too many differences")
					}
				}
			}
			t.Logf("%d readelf rows compared, %d FDEs", len(rows), tab.Len())
		})
	}
}

// TestRestoreUsesCIERule: DW_CFA_restore gives a register its rule from
// the CIE's initial instructions, where delve's interpreter says undefined.
func TestRestoreUsesCIERule(t *testing.T) {
	// CIE: rbp saved at CFA-16 (DW_CFA_offset r6, 2 with daf -8).
	cieIns := []byte{0x86, 0x02}
	// FDE: rbp at CFA-24, advance 1, restore rbp, advance 1, restore rbx.
	fdeIns := []byte{0x86, 0x03, 0x41, 0xc6, 0x41, 0xc3}
	p := program{machine: elf.EM_X86_64, codeAlig: 1, dataAlig: -8, raReg: 16}
	init := new(state)
	if err := p.run(cieIns, init, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	p.initial = init
	st := *init
	var got []state
	if err := p.run(fdeIns, &st, 100, 110, func(s, e uint64, st *state) { got = append(got, *st) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3", len(got))
	}
	if r := got[0].regs[6]; r.Kind != RuleOffset || r.Offset != -24 {
		t.Errorf("row 0 rbp = %+v, want offset -24", r)
	}
	if r := got[1].regs[6]; r.Kind != RuleOffset || r.Offset != -16 {
		t.Errorf("after restore rbp = %+v, want the CIE's offset -16", r)
	}
	if r := got[2].regs[3]; r.Kind != RuleUnspecified {
		t.Errorf("after restore rbx = %+v, want unspecified (the CIE has no rule)", r)
	}
}

// TestRestoreInLibc finds a real FDE that uses DW_CFA_restore and checks
// the restored register is not "undefined" (delve's result).
func TestRestoreInLibc(t *testing.T) {
	path := libcPath(t)
	if path == "" {
		t.Skip("no libc")
	}
	tab := load(t, path)
	found := 0
	for i := range tab.fdes {
		d := &tab.fdes[i]
		ins := d.insns
		// A DW_CFA_restore (0xc0|reg) as the first instruction after a
		// DW_CFA_advance_loc is common in epilogues; check the rows.
		dec := tab.decode(d)
		if dec.err != nil || !hasRestore(ins) {
			continue
		}
		for _, r := range dec.rows {
			for _, rr := range dec.regs[r.regOff : int(r.regOff)+int(r.regN)] {
				if rr.Kind == RuleUndefined {
					t.Errorf("FDE %#x: register %d undefined at %#x", d.start, rr.Reg, r.start)
				}
			}
		}
		found++
	}
	if found == 0 {
		t.Skip("no FDE with a restore-like byte")
	}
}

func hasRestore(ins []byte) bool {
	for _, b := range ins {
		if b&0xc0 == cfaRestore {
			return true
		}
	}
	return false
}

// TestSignalFrameRow: glibc's __restore_rt FDE (CIE augmentation "zRS")
// is marked Signal, with an expression CFA.
func TestSignalFrameRow(t *testing.T) {
	path := libcPath(t)
	if path == "" {
		t.Skip("no libc")
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	code, _ := text.Data()
	i := bytes.Index(code, []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05})
	if i < 0 {
		t.Skip("no __restore_rt in libc")
	}
	pc := text.Addr + uint64(i)
	tab, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	row, err := tab.Lookup(pc - 1) // the FDE starts one byte early for return-address lookups
	if err != nil {
		t.Fatal(err)
	}
	if !row.Signal || row.CFA.Kind != RuleCFAExpression || row.Reg(6).Kind != RuleExpression {
		t.Errorf("__restore_rt row: %+v", row)
	}
}

func TestUnsupportedTargets(t *testing.T) {
	for _, m := range []elf.Machine{elf.EM_PPC64, elf.EM_386} {
		if _, err := Build(m, Section{Name: ".eh_frame", Data: []byte{0, 0, 0, 0}, Addr: 0x1000}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v: %v, want ErrUnsupported", m, err)
		}
	}
	f := &elf.File{FileHeader: elf.FileHeader{Class: elf.ELFCLASS64, ByteOrder: binary.BigEndian, Machine: elf.EM_AARCH64}}
	if _, err := Load(f); !errors.Is(err, ErrUnsupported) {
		t.Errorf("big-endian aarch64: %v, want ErrUnsupported", err)
	}
}

// TestTruncated cuts libc's .eh_frame at many places: each cut is an
// error naming the section, or a table; never a panic.
func TestTruncated(t *testing.T) {
	data, addr := ehFrame(t, filepath.Join("..", "testdata", "targets", "bin", "chains-sframe3"))
	for cut := 0; cut < len(data); cut += 7 {
		tab, err := Build(elf.EM_X86_64, Section{Name: ".eh_frame", Data: data[:cut], Addr: addr})
		if err != nil {
			if !strings.Contains(err.Error(), ".eh_frame") {
				t.Errorf("cut %d: error %q does not name the section", cut, err)
			}
			continue
		}
		tab.DecodeAll()
	}
	// A bad opcode in an FDE fails lookups in that FDE only, with the
	// section and offset.
	bad := bytes.Clone(data)
	tab, err := Build(elf.EM_X86_64, Section{Name: ".eh_frame", Data: bad, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	d := &tab.fdes[0]
	off := len(bad) - cap(d.insns)
	if len(d.insns) == 0 {
		t.Skip("first FDE has no instructions")
	}
	bad[off] = 0x3f // not a CFA opcode
	tab, _ = Build(elf.EM_X86_64, Section{Name: ".eh_frame", Data: bad, Addr: addr})
	_, err = tab.Lookup(tab.fdes[0].start)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Section != ".eh_frame" || fe.Offset != int64(off) {
		t.Errorf("bad opcode: %v, want a FormatError at %#x", err, off)
	}
	if _, err := tab.Lookup(tab.fdes[len(tab.fdes)-1].start); err != nil {
		t.Errorf("another FDE: %v", err)
	}
}

func ehFrame(t testing.TB, path string) ([]byte, uint64) {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".eh_frame")
	if s == nil {
		t.Skip("no .eh_frame")
	}
	data, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return data, s.Addr
}

// firstRecords returns the first n length-prefixed records of .eh_frame
// data (the CIE and a few FDEs): a small seed. The fuzzer minimises every
// input that finds new code; a whole section as seed keeps it minimising
// instead of fuzzing.
func firstRecords(data []byte, n int) []byte {
	at := 0
	for ; n > 0 && at+4 <= len(data); n-- {
		l := int(binary.LittleEndian.Uint32(data[at:]))
		if l == 0 || l == 0xffffffff || at+4+l > len(data) {
			break
		}
		at += 4 + l
	}
	return data[:at]
}

func FuzzCFI(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	for _, p := range []string{filepath.Join("..", "testdata", "targets", "bin", "chains-sframe2")} {
		if _, err := os.Stat(p); err == nil {
			data, _ := ehFrame(f, p)
			f.Add(firstRecords(data, 4))
		}
	}
	f.Add([]byte{0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Build(elf.EM_X86_64, Section{Name: ".eh_frame", Data: data, Addr: 0x1000})
		if err != nil {
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
