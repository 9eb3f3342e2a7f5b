package symbols

import (
	"debug/elf"
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
