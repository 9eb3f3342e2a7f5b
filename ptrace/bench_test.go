//go:build linux

package ptrace

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkSample samples one busy thread like ptrace-floor.c does (16 KiB
// of stack, 1 ms apart) and reports the median Stopped (wait return ->
// resume) and Total (interrupt -> resume) times.
func BenchmarkSample(b *testing.B) {
	tg := startTarget(b, "spin", "1")
	tr := NewTracer()
	defer tr.Close()
	p := attach(b, tr, tg.pid)
	defer p.Detach()
	var s Sample
	stopped := make([]time.Duration, 0, b.N)
	total := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.SampleInto(&s, tg.pid, 16384, 0); err != nil {
			b.Fatal(err)
		}
		stopped = append(stopped, s.Stopped)
		total = append(total, s.Total)
		b.StopTimer()
		time.Sleep(time.Millisecond)
		b.StartTimer()
	}
	slices.Sort(stopped)
	slices.Sort(total)
	b.ReportMetric(float64(stopped[len(stopped)/2].Nanoseconds())/1e3, "stopped-µs/median")
	b.ReportMetric(float64(total[len(total)/2].Nanoseconds())/1e3, "total-µs/median")
	b.ReportMetric(float64(total[len(total)*99/100].Nanoseconds())/1e3, "total-µs/p99")
}
