package engine

import (
	"os"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/ptrace"
)

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("live ptrace tests need root (or CAP_SYS_PTRACE); CI runs them as root")
	}
}

// EngineOptions are what a test asks of a recording with the ptrace back
// end: the back end's options and the engine's.
type EngineOptions struct {
	Rate     float64
	Idle     bool
	TIDs     []int
	Duration time.Duration
	// CloseAtEnd is Options.CloseAtEnd.
	CloseAtEnd bool
}

// Target is a process to record: a recording attaches to it with the
// ptrace back end, and names its stacks with a Resolver.
type Target struct {
	pid     int
	tr      *ptrace.Tracer
	cache   *modules.ModuleCache
	symbols resolve.SymbolOptions
	src     *ptracesampler.Source
	res     *resolve.Resolver
	mem     *ptrace.Memory
}

// openTarget prepares recording pid; everything is released when the
// test ends.
func openTarget(t testing.TB, pid int) *Target {
	return openTargetSymbols(t, pid, resolve.SymbolOptions{})
}

func openTargetSymbols(t testing.TB, pid int, symbols resolve.SymbolOptions) *Target {
	t.Helper()
	tg := &Target{pid: pid, tr: ptrace.NewTracer(), cache: modules.NewModuleCache(), symbols: symbols}
	t.Cleanup(func() {
		tg.Close()
		tg.tr.Close()
		tg.cache.Close()
	})
	return tg
}

// Close detaches and releases the resolver.
func (tg *Target) Close() error {
	var err error
	if tg.src != nil {
		err = tg.src.Close()
	}
	if tg.res != nil {
		tg.res.Close()
	}
	if tg.mem != nil {
		tg.mem.Close()
	}
	tg.src, tg.res, tg.mem = nil, nil, nil
	return err
}

// newEngine attaches to tg's process (the ptrace back end) and returns an
// engine over it, as record and top wire them.
func newEngine(t testing.TB, tg *Target, opts EngineOptions) *Engine {
	t.Helper()
	src, err := ptracesampler.Open(tg.tr, tg.pid, ptracesampler.Options{Rate: opts.Rate, Idle: opts.Idle, TIDs: opts.TIDs})
	if err != nil {
		t.Fatal(err)
	}
	tg.src = src
	tg.mem = ptrace.NewMemory(tg.pid)
	res, err := resolve.New(tg.pid, tg.mem, tg.cache, resolve.Options{Symbols: tg.symbols, PACMask: src.PACMask()})
	if err != nil {
		t.Fatal(err)
	}
	tg.res = res
	return New(src, res, Options{Period: src.Period(), Duration: opts.Duration, Wall: opts.Idle, CloseAtEnd: opts.CloseAtEnd})
}
