package resolve

import (
	"os"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/unwind"
)

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("live ptrace tests need root (or CAP_SYS_PTRACE); CI runs them as root")
	}
}

// liveTarget is a process attached for a test: the resolver under test
// and the ptrace process its samples come from.
type liveTarget struct {
	*Resolver
	proc *ptrace.Process
}

// openTarget attaches to pid and arranges detaching when the test ends.
func openTarget(t testing.TB, pid int) *liveTarget {
	t.Helper()
	tr := ptrace.NewTracer()
	t.Cleanup(tr.Close)
	cache := modules.NewModuleCache()
	t.Cleanup(func() { cache.Close() })
	proc, err := tr.Attach(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Detach() })
	mem := ptrace.NewMemory(pid)
	t.Cleanup(func() { mem.Close() })
	r, err := New(pid, mem, cache, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &liveTarget{Resolver: r, proc: proc}
}

// walks samples tids and returns each sampled thread's walk.
func (lt *liveTarget) walks(t testing.TB, tids []int) (walks [][]unwind.Frame) {
	t.Helper()
	if err := lt.proc.SampleEach(tids, 16<<10, func(i int, s *ptrace.Sample, err error) bool {
		if err == nil {
			bs := backend.Sample{TID: s.TID, Regs: s.Regs, StackAddr: s.StackAddr, Stack: s.Stack}
			walks = append(walks, append([]unwind.Frame(nil), lt.Walk(&bs).Frames...))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return walks
}

// stacks samples tids and calls fn with each thread's named stack.
func (lt *liveTarget) stacks(t *testing.T, tids []int, fn func(st Stack, err error)) {
	t.Helper()
	err := lt.proc.SampleEach(tids, 16<<10, func(i int, s *ptrace.Sample, err error) bool {
		if err != nil {
			fn(Stack{}, err)
			return true
		}
		bs := backend.Sample{TID: s.TID, Regs: s.Regs, StackAddr: s.StackAddr, Stack: s.Stack}
		fn(lt.Resolve(&bs), nil)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// freshSymbols drops every table the resolver loaded, so that the next
// naming starts from nothing (and the symbolizer's close saves to the
// cache what it learned).
func (lt *liveTarget) freshSymbols() {
	lt.syms.close()
	lt.syms, lt.tails = newSymbolizer(), &tailCalls{}
	lt.named.reset()
}

// nameAll names every walk with opt, which must not leave any pending,
// and counts the tail-call frames.
func (lt *liveTarget) nameAll(t testing.TB, walks [][]unwind.Frame, opt SymbolOptions) (stacks [][]profile.Frame, tails int) {
	t.Helper()
	for _, w := range walks {
		fr, pending := lt.symbolizeFrames(w, opt)
		if pending {
			t.Fatal("a waiting symbolisation left frames pending")
		}
		for _, f := range fr {
			if f.Method == unwind.MethodTailCall.String() {
				tails++
			}
		}
		stacks = append(stacks, fr)
	}
	return stacks, tails
}

// startReady starts the program bin and waits until it is ready and its
// threads reached their waits.
func startReady(t *testing.T, bin string) *targets.Target {
	t.Helper()
	tg := targets.StartCommand(t, bin)
	select {
	case <-tg.Ready():
	case <-time.After(targets.ReadyTimeout):
		t.Fatalf("not ready: %s", tg.Output())
	}
	time.Sleep(100 * time.Millisecond)
	return tg
}
