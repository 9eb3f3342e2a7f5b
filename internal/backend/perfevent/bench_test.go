package perfevent

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/regs"
)

// BenchmarkRingParse measures what the back end spends per sample in user
// space before unwinding: reading one record of a 16 KiB stack window off
// the ring (the wrapped one copied), parsing it and filling the registers.
func BenchmarkRingParse(b *testing.B) {
	const ringSize = 1 << 20
	data := make([]byte, ringSize)
	rec := sampleRecord(DefaultWindow, DefaultWindow)
	var head, tail uint64
	r, err := NewRing(data, &head, &tail, le)
	if err != nil {
		b.Fatal(err)
	}
	f := testFormat()
	var parsed Record
	var s regs.Set
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		// The producer: one record at head (wrapping like the kernel).
		off := head % ringSize
		n := copy(data[off:], rec)
		copy(data, rec[n:])
		head += uint64(len(rec))

		r.Begin()
		raw, _, ok := r.Next()
		if !ok {
			b.Fatal(r.Err())
		}
		if err := f.ParseRecord(raw, &parsed); err != nil {
			b.Fatal(err)
		}
		if err := layoutAMD64.Fill(parsed.Regs[:parsed.NumRegs], &s); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkBusyThreads16 samples testdata/busy.c's 16 spinning threads at
// 999 Hz with the default 16 KiB window: one op is one round (Next), and
// the metrics are the samples the kernel dropped (lost%), samples per
// round, and this process's CPU (user + system) per second of wall time
// spent reading and parsing the rings (no unwinding): the back end's own
// share of issue 17's targets (lost <= 1%, stacktop <= 5% of a core).
//
//	go test -run '^$' -bench BusyThreads16 -benchtime 30x ./internal/backend/perfevent
func BenchmarkBusyThreads16(b *testing.B) {
	bin := buildCB(b, "busy")
	tg := targets.StartCommand(b, bin, "16")
	<-tg.Ready()
	s, err := Open(tg.PID(), Options{Rate: 999})
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	ctx := context.Background()
	var samples, lost int64
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		r, err := s.Next(ctx, func(*backend.Sample) { samples++ })
		if err != nil {
			b.Fatal(err)
		}
		lost += r.Lost
	}
	wall := time.Since(start)
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	if samples+lost > 0 {
		b.ReportMetric(100*float64(lost)/float64(samples+lost), "lost%")
	}
	b.ReportMetric(float64(samples)/float64(b.N), "samples/op")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu%")
}

func buildCB(b *testing.B, name string) string {
	b.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		b.Skip("no gcc")
	}
	out := filepath.Join(b.TempDir(), name)
	if o, err := exec.Command(gcc, "-O1", "-pthread", "-o", out, filepath.Join("testdata", name+".c")).CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, o)
	}
	return out
}
