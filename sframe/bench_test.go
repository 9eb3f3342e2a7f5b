package sframe

import (
	"math/rand/v2"
	"testing"
)

// bigSection encodes n functions of a few hundred bytes with five rows
// each, like a mid-sized shared library.
func bigSection(n int, version uint8) (*tSection, []byte) {
	flags := FlagFDESorted | FlagFDEFuncStartPCRel
	if version == 1 {
		flags = FlagFDESorted
	}
	sec := &tSection{Version: version, Flags: flags, ABI: ABIAMD64LittleEndian, FixRA: -8, Vaddr: 0x400000}
	start := uint64(0x10000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		size := uint32(0x40 + rng.IntN(0x1c0))
		sec.FDEs = append(sec.FDEs, tFDE{Start: start, Size: size, FREType: -1, FREs: []tFRE{
			{Start: 0, SP: true, Words: []int64{8}},
			{Start: 1, SP: true, Words: []int64{16, -16}},
			{Start: 4, Words: []int64{16, -16}},
			{Start: size - 2, SP: true, Words: []int64{8, -16}},
			{Start: size - 1, SP: true, Words: []int64{8}},
		}})
		start += uint64(size) + uint64(rng.IntN(16)) // gaps between some functions
	}
	b, _ := sec.encode()
	return sec, b
}

func BenchmarkLookup(b *testing.B) {
	for _, v := range []uint8{2, 3} {
		b.Run(map[uint8]string{2: "v2", 3: "v3"}[v], func(b *testing.B) {
			sec, data := bigSection(8000, v)
			s, err := Parse(data, sec.Vaddr)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			pcs := make([]uint64, 4096)
			for i := range pcs {
				f := sec.FDEs[rng.IntN(len(sec.FDEs))]
				pcs[i] = f.Start + uint64(rng.IntN(int(f.Size)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Lookup(pcs[i&4095]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	sec, data := bigSection(8000, 3)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(data, sec.Vaddr); err != nil {
			b.Fatal(err)
		}
	}
}

// The benchmark's allocation promise, as a test: Lookup allocates nothing.
func TestLookupAllocs(t *testing.T) {
	sec, data := bigSection(5000, 3)
	s, err := Parse(data, sec.Vaddr)
	if err != nil {
		t.Fatal(err)
	}
	pc := sec.FDEs[2500].Start + 5
	if n := testing.AllocsPerRun(100, func() { s.Lookup(pc) }); n != 0 {
		t.Fatalf("Lookup allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { s.Lookup(1) }); n != 0 {
		t.Fatalf("Lookup miss allocates %v times", n)
	}
}

// BenchmarkLookupHot looks one PC up again and again: a sampler unwinds the
// same few hot functions sample after sample, so their FDEs and FREs stay
// in cache. BenchmarkLookup, over random PCs of 8,000 functions, measures
// the cache-missing case.
func BenchmarkLookupHot(b *testing.B) {
	sec, data := bigSection(8000, 3)
	s, err := Parse(data, sec.Vaddr)
	if err != nil {
		b.Fatal(err)
	}
	f := sec.FDEs[4000]
	pc := f.Start + uint64(f.Size)/2
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Lookup(pc); err != nil {
			b.Fatal(err)
		}
	}
}
