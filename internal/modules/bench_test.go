package modules

import (
	"os"
	"testing"
)

// BenchmarkRefreshUnchanged is the per-sample cost of noticing that a
// process's mappings did not change.
func BenchmarkRefreshUnchanged(b *testing.B) {
	cache := NewModuleCache()
	defer cache.Close()
	as, err := LoadAddressSpace(os.Getpid(), cache)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if as, err = as.Refresh(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadAddressSpaceWarm is attaching to a process whose objects
// the cache already holds (a second process of the same program).
func BenchmarkLoadAddressSpaceWarm(b *testing.B) {
	cache := NewModuleCache()
	defer cache.Close()
	if _, err := LoadAddressSpace(os.Getpid(), cache); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := LoadAddressSpace(os.Getpid(), cache); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadAddressSpaceCold(b *testing.B) {
	for b.Loop() {
		cache := NewModuleCache()
		if _, err := LoadAddressSpace(os.Getpid(), cache); err != nil {
			b.Fatal(err)
		}
		cache.Close()
	}
}

func BenchmarkFind(b *testing.B) {
	cache := NewModuleCache()
	defer cache.Close()
	as, err := LoadAddressSpace(os.Getpid(), cache)
	if err != nil {
		b.Fatal(err)
	}
	pcs := make([]uint64, 0, 64)
	for _, e := range as.Exec {
		pcs = append(pcs, e.Start, e.End-1, e.Start+e.Size()/2)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := as.Find(pcs[i%len(pcs)]); !ok {
			b.Fatalf("miss %#x in %v", pcs[i%len(pcs)], as.Exec)
		}
	}
}
