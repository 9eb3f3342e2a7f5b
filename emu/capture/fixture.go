//go:build linux

package main

// "capture test": each fixture attached, frozen and sampled, and each
// spinning thread's walk checked against its known chain.

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// expectation is the known chain of one thread of spin.c, innermost
// first, and how the fixture's build must find the callers.
type expectation struct {
	comm  string
	chain []string
	// leaf: chain[0] calls nothing. Built with frame pointers only
	// (arm64-fp omits leaf frame records), it saves nothing: its caller
	// must come from the link register (lr), the rest by frame records.
	leaf bool
}

var spinThreads = []expectation{
	{"deep", []string{"spin_nonleaf", "level1", "level2", "level3", "deep_thread"}, false},
	{"leaf", []string{"spin_leaf", "leaf_caller", "leaf_thread"}, true},
	// A leaf with 40 KiB of locals: its caller is beyond a 16 KiB window,
	// inside the copy of the used stack.
	{"big", []string{"spin_bigleaf", "big_caller", "big_thread"}, true},
}

// callerMethod is the method every caller in the known chain must come
// from, by the fixture's name (see testdata/cross/build.sh).
func callerMethod(fixture string) unwind.Method {
	switch {
	case strings.HasSuffix(fixture, "-sframe"):
		return unwind.MethodSFrame
	case strings.HasSuffix(fixture, "-backchain"):
		return unwind.MethodBackChain
	}
	return unwind.MethodFP
}

func testMain(args []string) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	snapshots := fs.Bool("snapshots", false, "print snapshots of the deep, leaf and big threads")
	rounds := fs.Int("rounds", 5, "freeze-and-sample rounds per fixture")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tr := ptrace.NewTracer()
	defer tr.Close()
	failed := 0
	for _, fx := range fs.Args() {
		start := time.Now()
		err := testFixture(tr, fx, *rounds, *snapshots)
		status := "PASS"
		if err != nil {
			status = "FAIL: " + err.Error()
			failed++
		}
		fmt.Printf("--- %s %s (%.1fs)\n", status, filepath.Base(fx), time.Since(start).Seconds())
	}
	fmt.Printf("capture: %d passed, %d failed\n", len(fs.Args())-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

func testFixture(tr *ptrace.Tracer, fixture string, rounds int, snapshots bool) error {
	pid, err := spawn(fixture)
	if err != nil {
		return err
	}
	defer unix.Kill(pid, unix.SIGKILL)
	t, err := loadTarget(pid, fixture)
	if err != nil {
		return err
	}
	proc, err := tr.Attach(pid)
	if err != nil {
		return err
	}
	defer proc.Detach()
	// Once, before any freeze: PACMask stops and resumes a thread itself.
	pac, err := proc.PACMask()
	if err != nil {
		return err
	}
	want := callerMethod(t.name)
	live := ptrace.NewMemory(pid)
	defer live.Close()
	var firstErr error
	for round := 0; round < rounds; round++ {
		last := round == rounds-1
		if last {
			fmt.Printf("=== dump of %s (pid %d), round %d\n", t.name, pid, round)
		}
		if err := checkRound(proc, t, live, pac, want, last, snapshots && last); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("round %d: %w", round, err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	return firstErr
}

// comm is thread tid's name, "" when it cannot be read.
func comm(pid, tid int) string {
	st, _ := procmaps.ReadStat(pid, tid)
	return st.Comm
}

func checkRound(proc *ptrace.Process, t *target, live unwind.Memory, pac uint64, want unwind.Method, print, snapshots bool) error {
	if err := proc.Freeze(); err != nil {
		return err
	}
	type taken struct {
		s    ptrace.Sample
		fprs int
	}
	var samples []taken
	for _, tid := range proc.Threads() {
		s, err := proc.Sample(tid, 16<<10, 0)
		if err != nil {
			proc.Thaw()
			return fmt.Errorf("thread %d: %w", tid, err)
		}
		// As a dump copies it: the thread's used stack, from SP to the top
		// of its mapping (frozen, the thread is read again, not stopped),
		// so a frame larger than the 16 KiB window is in the copy.
		if top := t.stackOf(s.StackAddr).High; top > s.StackAddr+uint64(len(s.Stack)) {
			if s, err = proc.Sample(tid, min(int(top-s.StackAddr), 1<<20), top); err != nil {
				proc.Thaw()
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
		if err := proc.FPRegs(tid, &s.Regs); err != nil {
			proc.Thaw()
			return fmt.Errorf("thread %d: %w", tid, err)
		}
		samples = append(samples, taken{s, popcount(s.Regs.Valid >> 16)})
	}
	if err := proc.Thaw(); err != nil {
		return err
	}
	if print {
		fmt.Printf("pac mask %#x\n", pac)
	}
	var errs []error
	for _, tk := range samples {
		s := tk.s
		c := comm(proc.PID(), s.TID)
		stack := t.stackOf(s.StackAddr)
		opts := Options(s.Regs.Arch, t.mods, stack, pac)
		// The link-register rule for a leaf without tables needs the
		// functions' bounds (static, non-PIE: symbol values are addresses).
		opts.FuncAt = func(pc uint64) (uint64, uint64, bool) {
			sym, ok := t.symbolize(pc)
			return sym.Value, sym.Value + sym.Size, ok
		}
		// Beyond the copy the walk would read the live stack, as the
		// sampler does; the copy holds the thread's stack, so it must not
		// (StackEnd records such reads).
		win := &unwind.StackWindow{Base: s.StackAddr, Bytes: s.Stack, Fallback: live, StackEnd: stack.High}
		st := unwind.Walk(s.Regs, win, t.mods, opts)
		if print {
			fprs := ""
			if s.Regs.Arch == regs.S390X {
				fprs = fmt.Sprintf(", %d FPRs read as DWARF 16-31", tk.fprs)
			}
			fmt.Printf("thread %d %q (%s%s) complete=%v err=%v\n", s.TID, c, s.Regs.Arch, fprs, st.Complete, st.Err)
			for i, f := range st.Frames {
				fmt.Printf("  #%-2d %#016x %-9s %s\n", i, f.PC, f.Method, t.describe(f.PC, i))
			}
		}
		for _, e := range spinThreads {
			if e.comm != c {
				continue
			}
			if err := checkChain(t, st, e, want); err != nil {
				errs = append(errs, fmt.Errorf("thread %s: %w", c, err))
				continue
			}
			if win.Missed > 0 {
				errs = append(errs, fmt.Errorf("thread %s: %d reads of its stack beyond the %d bytes copied", c, win.Missed, len(s.Stack)))
				continue
			}
			// A caller taken from the link register was checked against
			// the code before it, which a snapshot does not hold: such a
			// walk would not replay.
			if snapshots && !slices.ContainsFunc(st.Frames, func(f unwind.Frame) bool { return f.Method == unwind.MethodLinkReg }) {
				if err := emitSnapshot(t, s, st, stack, pac, c); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func popcount(v uint64) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

// checkChain: the stack starts with the known chain, and every caller in
// it was found by the fixture's method.
func checkChain(t *target, st unwind.Stack, e expectation, want unwind.Method) error {
	chain := e.chain
	if len(st.Frames) < len(chain) {
		return fmt.Errorf("%d frames, want at least %d (%v): %v", len(st.Frames), len(chain), chain, st.Err)
	}
	for i, name := range chain {
		f := st.Frames[i]
		pc := f.PC
		if i > 0 {
			pc-- // a return address: the call is before it
		}
		s, ok := t.symbolize(pc)
		if !ok || s.Name != name {
			return fmt.Errorf("frame %d is %s, want %s", i, t.describe(f.PC, i), name)
		}
		w := want
		if i == 1 && e.leaf && want == unwind.MethodFP {
			w = unwind.MethodLinkReg
		}
		if i > 0 && f.Method != w {
			return fmt.Errorf("frame %d (%s) found by %v, want %v", i, name, f.Method, w)
		}
	}
	return nil
}
