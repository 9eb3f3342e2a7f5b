package resolve

import (
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/unwind"
)

// BenchmarkName names the walks of a 1,000-thread process (manythreads:
// spinners, and threads blocked in libc's pthread_cond_wait and
// nanosleep) with file:line, inlined and tail-call frames, from libc's
// separate debug file when it is installed.
//
// dump: as a dump names them, once with a fresh Resolver whose line
// tables were prefetched (PrefetchLines, while the dump samples), with a
// warm DWARF cache: what is timed is the phase after the sampling, which
// decodes the DWARF units of the PCs seen and names every frame.
// warm: the same walks named again by the same Resolver, every unit
// decoded (the steady state of record and top).
func BenchmarkName(b *testing.B) {
	needRoot(b)
	tg := targets.Start(b, "manythreads-sframe3", "1000")
	pid := tg.PID()
	lt := openTarget(b, pid)
	tids, err := procmaps.Threads(pid)
	if err != nil {
		b.Fatal(err)
	}
	walks := lt.walks(b, tids)
	if len(walks) < 1000 {
		b.Fatalf("%d walks of %d threads", len(walks), len(tids))
	}
	opts := Options{Symbols: SymbolOptions{CacheDir: b.TempDir()}}
	fresh := func(b *testing.B) *Resolver {
		r, err := New(pid, lt.mem, lt.cache, opts)
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range walks {
			r.PrefetchLines(w)
		}
		r.syms.mu.Lock()
		for _, ms := range r.syms.mods {
			if ms.linesDone != nil {
				<-ms.linesDone
			}
		}
		r.syms.mu.Unlock()
		return r
	}
	nameAll := func(r *Resolver) (frames int) {
		for _, w := range walks {
			frames += len(r.Name(unwind.Stack{Frames: w, Complete: true}).Frames)
		}
		return frames
	}
	// A user's first dump fills the DWARF cache.
	r := fresh(b)
	nameAll(r)
	r.Close()

	b.Run("dump", func(b *testing.B) {
		b.ReportAllocs()
		var used time.Duration
		for range b.N {
			b.StopTimer()
			r := fresh(b)
			b.StartTimer()
			start := processCPU()
			nameAll(r)
			used += processCPU() - start
			b.StopTimer()
			r.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
	})
	b.Run("warm", func(b *testing.B) {
		r := fresh(b)
		defer r.Close()
		nameAll(r)
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		for range b.N {
			nameAll(r)
		}
	})
}

// reportCPU reports the process's CPU time per op (processCPU) from here
// to the call of the function it returns.
func reportCPU(b *testing.B) (stop func()) {
	start := processCPU()
	return func() {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

// processCPU is the CPU time (user and system, every thread) the process
// used so far: on a loaded machine the wall time per op also counts the
// waits for a CPU, this does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
