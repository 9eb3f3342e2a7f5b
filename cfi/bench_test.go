package cfi

import (
	"debug/elf"
	"math/rand/v2"
	"testing"
)

// BenchmarkLoad: building libc's table (parsing every FDE header; programs
// run lazily).
func BenchmarkLoad(b *testing.B) {
	path := libcPath(b)
	if path == "" {
		b.Skip("no libc")
	}
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		if _, err := Load(f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAll: running every FDE program of libc once (what an
// eager table would cost at load).
func BenchmarkDecodeAll(b *testing.B) {
	path := libcPath(b)
	if path == "" {
		b.Skip("no libc")
	}
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		tab, _ := Load(f)
		if _, _, err := tab.DecodeAll(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup: lookups at random covered addresses of libc, every FDE
// decoded already (the steady state of a sampler).
func BenchmarkLookup(b *testing.B) {
	path := libcPath(b)
	if path == "" {
		b.Skip("no libc")
	}
	tab := load(b, path)
	tab.DecodeAll()
	pcs := make([]uint64, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range pcs {
		d := &tab.fdes[r.IntN(len(tab.fdes))]
		pcs[i] = d.start + r.Uint64N(d.end-d.start)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := tab.Lookup(pcs[i&4095]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
