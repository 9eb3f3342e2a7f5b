package symbols

import (
	"fmt"
	"runtime"
	"testing"
)

// bigPerfMap is a perf map of about n bytes in lines of a node-like JIT
// (about 70 bytes each).
func bigPerfMap(n int) []byte {
	b := make([]byte, 0, n+128)
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "%x %x LazyCompile:*handler%d /srv/app/routes/index.js:%d\n", 0x7f0000000000+i*0x40, 0x40, i, i%997)
	}
	return b
}

// BenchmarkParsePerfMapMemory parses a 64 MB perf map (the most stacktop
// reads) and reports the heap the parsed map keeps (retained-MB, the
// file's bytes included: the map's names are slices of them).
func BenchmarkParsePerfMapMemory(b *testing.B) {
	data := bigPerfMap(64 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	var m *PerfMap
	for range b.N {
		m, _ = ParsePerfMap(data)
	}
	b.StopTimer()
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	runtime.KeepAlive(m)
	m = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	b.ReportMetric(float64(with.HeapAlloc-without.HeapAlloc)/(1<<20), "retained-MB")
}
