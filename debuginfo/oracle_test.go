package debuginfo

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/symbols"
)

// buildCXX compiles testdata/inline.cc with -O2 -g.
func buildCXX(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("g++ not installed")
	}
	bin := filepath.Join(t.TempDir(), "inline")
	out, err := exec.Command("g++", "-O2", "-g", "-o", bin, "testdata/inline.cc").CombinedOutput()
	if err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	return bin
}

// a2lFrame is one frame as addr2line -f -i prints it.
type a2lFrame struct {
	fn, file string
	line     int
}

// addr2line runs binutils' addr2line -a -f -i -C on each of addrs and
// returns the inline chain of each, innermost first. One process per
// address: binutils 2.40 carries state between the addresses of one run
// and then names inline frames after the outermost function.
func addr2line(t *testing.T, bin string, addrs []uint64) map[uint64][]a2lFrame {
	t.Helper()
	if _, err := exec.LookPath("addr2line"); err != nil {
		t.Skip("addr2line (binutils) not installed")
	}
	res := map[uint64][]a2lFrame{}
	for _, a := range addrs {
		out, err := exec.Command("addr2line", "-a", "-f", "-i", "-C", "-e", bin, fmt.Sprintf("%#x", a)).Output()
		if err != nil {
			t.Fatalf("addr2line: %v", err)
		}
		parseAddr2line(out, res)
	}
	return res
}

func parseAddr2line(out []byte, res map[uint64][]a2lFrame) {
	var cur uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "0x") && !strings.Contains(l, ":") {
			cur, _ = strconv.ParseUint(l[2:], 16, 64)
			continue
		}
		if i+1 >= len(lines) {
			break
		}
		loc := lines[i+1]
		i++
		if k := strings.Index(loc, " (discriminator"); k >= 0 {
			loc = loc[:k]
		}
		colon := strings.LastIndexByte(loc, ':')
		ln, _ := strconv.Atoi(loc[colon+1:])
		res[cur] = append(res[cur], a2lFrame{fn: l, file: loc[:colon], line: ln})
	}
}

// compareChain checks one PC's frames against addr2line's. File names are
// compared by base name (addr2line and Go join directories differently:
// "./nptl/./nptl/x.c" against "nptl/x.c"). addr2line names the innermost
// frame of some chains after the outermost function (binutils picks the
// "best fit" function, not the inlined one); that one name is accepted
// either way.
func compareChain(t *testing.T, pc uint64, got []Frame, want []a2lFrame) bool {
	t.Helper()
	if len(want) == 1 && want[0].fn == "??" {
		want = nil
	}
	if len(got) != len(want) {
		t.Errorf("%#x: %d frames, addr2line %d:\n got  %v\n want %v", pc, len(got), len(want), got, want)
		return false
	}
	ok := true
	for i := range got {
		g, w := got[i], want[i]
		if path.Base(g.File) != path.Base(w.file) || g.Line != w.line {
			t.Errorf("%#x frame %d: %s:%d, addr2line %s:%d", pc, i, g.File, g.Line, w.file, w.line)
			ok = false
		}
		// addr2line prints a function without a linkage name by its
		// DW_AT_name; stacktop adds its namespaces and classes, as gdb.
		nameOK := g.Function == w.fn || strings.HasSuffix(g.Function, "::"+w.fn) || i == 0 && w.fn == want[len(want)-1].fn
		if !nameOK {
			t.Errorf("%#x frame %d: function %q, addr2line %q", pc, i, g.Function, w.fn)
			ok = false
		}
		if g.Inlined != (i < len(got)-1) {
			t.Errorf("%#x frame %d: Inlined %v", pc, i, g.Inlined)
			ok = false
		}
	}
	return ok
}

func funcAddrs(t *testing.T, f *elf.File, names ...string) []uint64 {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	for _, s := range syms {
		for _, n := range names {
			if s.Name == n && s.Size > 0 {
				for a := s.Value; a < s.Value+s.Size; a++ {
					addrs = append(addrs, a)
				}
			}
		}
	}
	if len(addrs) == 0 {
		t.Fatalf("no symbols %v", names)
	}
	return addrs
}

// TestInlineChainsCXX compares every byte address of a function built
// from inlined templates and a lambda with addr2line -f -i -C.
func TestInlineChainsCXX(t *testing.T) {
	t.Parallel()
	bin := buildCXX(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	addrs := funcAddrs(t, f, "_ZN4demo3runERKSt6vectorIlSaIlEEl", "main")
	if len(addrs) > 400 {
		addrs = addrs[:400]
	}
	want := addr2line(t, bin, addrs)
	inlined, bad := 0, 0
	for _, pc := range addrs {
		got, err := l.Frames(pc, nil)
		if err != nil {
			t.Fatalf("%#x: %v", pc, err)
		}
		if len(got) > 1 {
			inlined++
		}
		if !compareChain(t, pc, got, want[pc]) {
			if bad++; bad > 10 {
				t.Fatal("too many mismatches")
			}
		}
	}
	if inlined < len(addrs)/4 {
		t.Errorf("only %d of %d addresses have inline frames: the test program no longer inlines", inlined, len(addrs))
	}
	t.Logf("%d addresses, %d with inline chains", len(addrs), inlined)
}

// libcPath finds the C library the tests run against.
func libcPath(t testing.TB) string {
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6", "/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no libc.so.6 found")
	return ""
}

// openLibcDebug opens libc and its separate debug file, skipping when the
// debug file is not installed (scripts/install-test-deps.sh installs it).
func openLibcDebug(t testing.TB) (*elf.File, *DebugFile, string) {
	p := libcPath(t)
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	id := buildIDOf(t, f)
	df, err := Locator{}.Find(p, f, id)
	if err != nil {
		t.Skipf("no debug file for %s (install libc6-dbg): %v", p, err)
	}
	t.Cleanup(func() { df.Close() })
	return f, df, p
}

func buildIDOf(t testing.TB, f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			continue
		}
		for len(b) >= 12 {
			nsz, dsz, typ := f.ByteOrder.Uint32(b), f.ByteOrder.Uint32(b[4:]), f.ByteOrder.Uint32(b[8:])
			no := 12 + int(nsz+3)&^3
			end := no + int(dsz+3)&^3
			if end > len(b) || no+int(dsz) > len(b) {
				break
			}
			if typ == 3 && string(b[12:12+nsz]) == "GNU\x00" {
				return fmt.Sprintf("%x", b[no:no+int(dsz)])
			}
			b = b[end:]
		}
	}
	return ""
}

// TestLibcDebugFile checks that libc's local functions, absent from its
// own tables, resolve once its build-ID debug file is merged, at the
// addresses gdb gives them.
func TestLibcDebugFile(t *testing.T) {
	t.Parallel()
	f, df, p := openLibcDebug(t)
	if df.Via != "build-id" {
		t.Errorf("found via %s, want build-id", df.Via)
	}
	plain, err := symbols.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := symbols.LoadWithDebug(f, df.File)
	if err != nil {
		t.Fatal(err)
	}
	if merged.Len() <= plain.Len() {
		t.Errorf("merged table has %d symbols, stripped %d", merged.Len(), plain.Len())
	}
	for _, name := range []string{"start_thread", "clone3"} {
		var found *symbols.Symbol
		for s := range merged.All() {
			if s.Name == name {
				found = &s
				break
			}
		}
		if found == nil {
			t.Errorf("%s not in merged table", name)
			continue
		}
		pc := found.Start + found.Size/2
		if s, ok := plain.Lookup(pc); ok && s.Name == name {
			t.Errorf("%s already in the stripped table: the test proves nothing", name)
		}
		if s, ok := merged.Lookup(pc); !ok || s.Name != name {
			t.Errorf("Lookup(%#x) = %q, want %s", pc, s.Name, name)
		}
		if _, err := exec.LookPath("gdb"); err == nil {
			out, _ := exec.Command("gdb", "-nx", "-batch", "-ex", fmt.Sprintf("info symbol %#x", pc), p).Output()
			if !strings.HasPrefix(strings.TrimSpace(string(out)), name+" + ") {
				t.Errorf("gdb names %#x %q, we %s", pc, out, name)
			}
		}
		// Lines and inline chains at the same PCs against addr2line.
		l, err := NewLines(df.File)
		if err != nil {
			t.Fatal(err)
		}
		var addrs []uint64
		for a := found.Start; a < found.End(); a += 1 + found.Size/8 {
			addrs = append(addrs, a)
		}
		want := addr2line(t, p, addrs)
		for _, a := range addrs {
			got, err := l.Frames(a, nil)
			if err != nil {
				t.Fatal(err)
			}
			// addr2line names assembly code (clone3.S) from the symbol
			// table; DWARF calls it __clone3. Compare lines only there.
			if len(got) == 1 && len(want[a]) == 1 {
				got[0].Function = want[a][0].fn
			}
			compareChain(t, a, got, want[a])
		}
	}
}
