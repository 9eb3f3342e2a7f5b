package symbols

import (
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchObject is a large real object to measure with: the C library the
// toolchain links against (thousands of symbols), else a test binary.
func benchObject(b *testing.B) string {
	if out, err := exec.Command("gcc", "-print-file-name=libc.so.6").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); filepath.IsAbs(p) {
			if f, err := elf.Open(p); err == nil {
				f.Close()
				return p
			}
		}
	}
	return filepath.Join("testdata", "cxxprog")
}

func BenchmarkLoad(b *testing.B) {
	path := benchObject(b)
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		tab, err := Load(f)
		if err != nil {
			b.Fatal(err)
		}
		n = tab.Len()
	}
	b.ReportMetric(float64(n), "symbols")
}

func BenchmarkLookup(b *testing.B) {
	path := benchObject(b)
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	tab, err := Load(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	lo, hi := tab.syms[0].Start, tab.syms[len(tab.syms)-1].End()
	r := rand.New(rand.NewPCG(1, 2))
	addrs := make([]uint64, 4096)
	for i := range addrs {
		addrs[i] = lo + r.Uint64N(hi-lo)
	}
	b.ReportAllocs()
	b.ReportMetric(float64(tab.Len()), "symbols")
	var hits int
	i := 0
	for b.Loop() {
		if _, ok := tab.Lookup(addrs[i&(len(addrs)-1)]); ok {
			hits++
		}
		i++
	}
	_ = hits
}

// BenchmarkLoadWithDebug loads the C library's table merged with its
// separate debug file's .symtab (Debian's libc6-dbg: 10,000 entries), as
// a dump of any C program does.
func BenchmarkLoadWithDebug(b *testing.B) {
	path := benchObject(b)
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	id := buildID(f)
	if len(id) < 3 {
		b.Skip("no build ID")
	}
	d, err := elf.Open(filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
	if err != nil {
		b.Skip("no separate debug file:", err)
	}
	defer d.Close()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		tab, err := LoadWithDebug(f, d)
		if err != nil {
			b.Fatal(err)
		}
		n = tab.Len()
	}
	b.ReportMetric(float64(n), "symbols")
}

// buildID is f's GNU build ID in hex, "" without one.
func buildID(f *elf.File) string {
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return ""
	}
	namesz := f.ByteOrder.Uint32(b)
	desc := b[12+(namesz+3)&^3:]
	return fmt.Sprintf("%x", desc)
}
