//go:build linux

package perfevent

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/regs"
)

// openOrSkip opens a Source, skipping the test where the kernel refuses
// perf events (the refusal itself is what TestRefusedMessage covers).
func openOrSkip(t *testing.T, pid int, opt Options) *Source {
	t.Helper()
	s, err := Open(pid, opt)
	var re *RefusedError
	if errors.As(err, &re) {
		t.Skipf("perf events refused here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// collect runs rounds for d and returns copies of the samples and the
// summed rounds.
func collect(t *testing.T, s *Source, d time.Duration, keep func(*backend.Sample) bool) ([]backend.Sample, backend.Round, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []backend.Sample
	var sum backend.Round
	for {
		r, err := s.Next(ctx, func(sm *backend.Sample) {
			if keep == nil || keep(sm) {
				c := *sm
				c.Stack = bytes.Clone(sm.Stack)
				out = append(out, c)
			}
		})
		sum.Lost += r.Lost
		sum.Failed += r.Failed
		sum.Exec = sum.Exec || r.Exec
		if r.Threads > 0 {
			sum.Threads = r.Threads
		}
		if r.Err != nil {
			sum.Err = r.Err
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = nil
			}
			return out, sum, err
		}
	}
}

type symtab struct {
	syms []elf.Symbol
	bias uint64
}

func loadSyms(t *testing.T, pid int, path string) (*symtab, []procmaps.Mapping) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	st := &symtab{syms: syms}
	minVaddr := ^uint64(0)
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr < minVaddr {
			minVaddr = p.Vaddr &^ 0xfff
		}
	}
	for _, m := range maps {
		if m.Offset == 0 && m.Kind == procmaps.KindFile && sameFile(m.Path, path) {
			st.bias = m.Start - minVaddr
			break
		}
	}
	return st, maps
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

func (st *symtab) name(pc uint64) string {
	for _, s := range st.syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && pc >= s.Value+st.bias && pc < s.Value+st.bias+s.Size {
			return s.Name
		}
	}
	return ""
}

// fpChain walks the frame-pointer chain of an amd64 sample inside its
// copied stack and names each return address.
func fpChain(st *symtab, sm *backend.Sample) []string {
	var names []string
	fp := sm.Regs.FP()
	for i := 0; i < 8; i++ {
		if fp < sm.StackAddr || fp+16 > sm.StackAddr+uint64(len(sm.Stack)) {
			break
		}
		off := fp - sm.StackAddr
		ret := binary.LittleEndian.Uint64(sm.Stack[off+8:])
		n := st.name(ret - 1)
		if n == "" {
			break
		}
		names = append(names, n)
		fp = binary.LittleEndian.Uint64(sm.Stack[off:])
	}
	return names
}

// TestSplitSamples samples split-fp (75% of its CPU in a->hot, 25% in
// b->cold): every sample's PC is in an executable mapping of the target and
// its SP in the stack, the copied stack is whole (the frame-pointer chain
// walks from hot or cold up to main inside the copy), the copied bytes above
// main's frame equal the target's memory, each sample weighs one period,
// and the split reads 75/25.
func TestSplitSamples(t *testing.T) {
	if regs.Host() != regs.AMD64 {
		t.Skip("the split target and frame-pointer check are amd64")
	}
	tg := targets.Start(t, "split-fp")
	const rate = 499
	s := openOrSkip(t, tg.PID(), Options{Rate: rate, Window: 32768})
	// Collect until 400 samples (the 75/25 split is then 75 +- 2.2 at one
	// standard deviation), for at most 15 s: a loaded machine gives the
	// target only a share of a CPU.
	var samples []backend.Sample
	var round backend.Round
	for start := time.Now(); len(samples) < 400 && time.Since(start) < 15*time.Second; {
		more, r, err := collect(t, s, time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, more...)
		round.Failed += r.Failed
		round.Lost += r.Lost
		round.Threads = r.Threads
		if r.Err != nil {
			round.Err = r.Err
		}
	}
	if round.Failed > 0 {
		t.Errorf("%d failed samples, last: %v", round.Failed, round.Err)
	}
	if round.Threads != 1 {
		t.Errorf("Round.Threads = %d, want 1", round.Threads)
	}
	if len(samples) < 100 {
		t.Fatalf("%d samples in 15 s at %d Hz on a busy thread", len(samples), rate)
	}
	st, maps := loadSyms(t, tg.PID(), targets.Path("split-fp"))
	var stack *procmaps.Mapping
	for i := range maps {
		if maps[i].Kind == procmaps.KindStack {
			stack = &maps[i]
		}
	}
	if stack == nil {
		t.Fatal("no [stack] mapping")
	}
	count := map[string]int{}
	whole, compared := 0, 0
	for i := range samples {
		sm := &samples[i]
		if sm.TID != tg.PID() {
			t.Fatalf("sample of thread %d, the target has only %d", sm.TID, tg.PID())
		}
		if sm.Weight != time.Duration(math.Round(1e9/rate)) {
			t.Errorf("weight %v, want the period %v", sm.Weight, time.Duration(math.Round(1e9/rate)))
		}
		inExec := false
		for j := range maps {
			if maps[j].IsExec() && maps[j].Contains(sm.Regs.PC) {
				inExec = true
			}
		}
		if !inExec {
			t.Errorf("PC %#x outside every executable mapping", sm.Regs.PC)
		}
		if !stack.Contains(sm.StackAddr) || sm.StackAddr+uint64(len(sm.Stack)) > stack.End {
			t.Errorf("stack %#x+%d outside [stack] %v", sm.StackAddr, len(sm.Stack), stack)
		}
		fn := st.name(sm.Regs.PC)
		count[fn]++
		chain := fpChain(st, sm)
		switch fn {
		case "hot":
			if len(chain) >= 2 && chain[0] == "a" && chain[1] == "main" {
				whole++
			}
		case "cold":
			if len(chain) >= 2 && chain[0] == "b" && chain[1] == "main" {
				whole++
			}
		}
		// Above main's frame record lie the frames of libc's start
		// code and the environment: they do not change while main runs,
		// so the copy must equal the target's memory there.
		if compared < 5 && (fn == "hot" || fn == "cold") && len(chain) >= 2 {
			fp := sm.Regs.FP()
			for i := 0; i < 2; i++ { // hot's record -> a's -> main's
				fp = binary.LittleEndian.Uint64(sm.Stack[fp-sm.StackAddr:])
			}
			end := sm.StackAddr + uint64(len(sm.Stack))
			if from := fp + 16; from < end {
				n := min(end-from, 512)
				mem := make([]byte, n)
				local := []unix.Iovec{{Base: &mem[0], Len: n}}
				remote := []unix.RemoteIovec{{Base: uintptr(from), Len: int(n)}}
				if _, err := unix.ProcessVMReadv(tg.PID(), local, remote, 0); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(mem, sm.Stack[from-sm.StackAddr:][:n]) {
					t.Errorf("the %d copied bytes above main's frame at %#x differ from the target's memory", n, from)
				}
				compared++
			}
		}
	}
	if compared == 0 {
		t.Errorf("no sample's copy reaches above main's frame")
	}
	onCPU := count["hot"] + count["cold"]
	t.Logf("%d samples: %v; %d whole frame-pointer chains; lost %d", len(samples), count, whole, round.Lost)
	// The rest are in clock_gettime (libc and the vDSO, unnamed here):
	// some 8% on an idle machine, more when the thread is often switched.
	if onCPU < len(samples)*8/10 {
		t.Errorf("only %d of %d samples in hot or cold", onCPU, len(samples))
	}
	if whole < onCPU*9/10 {
		t.Errorf("only %d of %d samples walk hot/cold -> a/b -> main within the copied stack", whole, onCPU)
	}
	pct := 100 * float64(count["hot"]) / float64(onCPU)
	if tol := targets.SplitTolerance(int64(onCPU)); math.Abs(pct-targets.SplitHotShare) > tol {
		t.Errorf("hot has %.1f%% of %d on-CPU samples, want 75 +- %.1f (split target)", pct, onCPU, tol)
	}
}

// buildC compiles a C test program of testdata with the host's gcc.
func buildC(t *testing.T, name string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build testdata/" + name + ".c")
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(gcc, "-O1", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", out, filepath.Join("testdata", name+".c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// TestFollowsNewThreads samples testdata/spawner.c, whose busy threads are
// all created after Open and exit while sampled: they are sampled
// (inherited events), their PCs are in late_spin, and their exits are not
// errors.
func TestFollowsNewThreads(t *testing.T) {
	bin := buildC(t, "spawner")
	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	before, err := procmaps.Threads(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	s := openOrSkip(t, tg.PID(), Options{Rate: 999})
	known := map[int]bool{}
	for _, tid := range before {
		known[tid] = true
	}
	samples, round, err := collect(t, s, 1500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := loadSyms(t, tg.PID(), bin)
	later := map[int]bool{}
	inSpin := 0
	for _, sm := range samples {
		if !known[sm.TID] {
			later[sm.TID] = true
		}
		if st.name(sm.Regs.PC) == "late_spin" {
			inSpin++
		}
	}
	t.Logf("%d samples (%d in late_spin) from %d threads created after Open; failed %d, lost %d", len(samples), inSpin, len(later), round.Failed, round.Lost)
	if len(later) < 6 {
		t.Errorf("samples from only %d threads created after Open, want two rounds of 3", len(later))
	}
	if inSpin < len(samples)*8/10 {
		t.Errorf("only %d of %d samples in late_spin", inSpin, len(samples))
	}
	if round.Failed > 0 {
		t.Errorf("%d failed, last %v", round.Failed, round.Err)
	}
	// Threads created later run on inherited events: stacktop opened
	// events only for the threads of the start, else a late thread
	// would be sampled twice per period.
	if st := s.Stats(); st.Events != len(before)*len(s.cpus) {
		t.Errorf("%d events open for %d threads at start x %d CPUs: late threads were opened again", st.Events, len(before), len(s.cpus))
	}
}

// TestExit: Next returns backend.ErrExited once the process is gone, and
// the samples before are delivered.
func TestExit(t *testing.T) {
	tg := targets.Start(t, "exiter-fp", "exit", "400")
	s := openOrSkip(t, tg.PID(), Options{Rate: 999})
	samples, _, err := collect(t, s, 10*time.Second, nil)
	if !errors.Is(err, backend.ErrExited) {
		t.Fatalf("Next ended with %v, want ErrExited", err)
	}
	if len(samples) == 0 {
		t.Error("no samples before the exit")
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestLostCounted: a ring of a few samples left unread overflows, and the
// kernel's PERF_RECORD_LOST counts reach Round.Lost.
func TestLostCounted(t *testing.T) {
	tg := targets.Start(t, "split-fp")
	s := openOrSkip(t, tg.PID(), Options{Rate: 999, RingBytes: 64 << 10})
	// Undrained, the ring overflows once the thread has run for some
	// 30 ms (a few dozen samples of an 8 KiB window): wait for 100 ms of
	// its CPU time, however long a loaded machine takes to give it.
	cpu0 := threadRunNS(t, tg.PID())
	for deadline := time.Now().Add(10 * time.Second); threadRunNS(t, tg.PID())-cpu0 < uint64(100*time.Millisecond) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	samples, round, err := collect(t, s, 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples, %d lost", len(samples), round.Lost)
	if round.Lost == 0 {
		t.Error("no lost samples counted from an overflowing 64 KiB ring")
	}
	if len(samples) == 0 {
		t.Error("no samples after the overflow")
	}
}

// threadRunNS is the CPU time of thread tid (its schedstat run time).
func threadRunNS(t *testing.T, tid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", tid))
	if err != nil {
		t.Fatal(err)
	}
	st, err := procmaps.ParseSchedstat(b)
	if err != nil {
		t.Fatal(err)
	}
	return st.RunNS
}

func TestIdleRefused(t *testing.T) {
	if _, err := Open(os.Getpid(), Options{Idle: true}); !errors.Is(err, ErrIdle) {
		t.Fatalf("Open with Idle: %v, want ErrIdle", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, opt := range []Options{
		{Window: 12},
		{Window: MaxWindow(regs.Host()) + 8},
		{Rate: -1},
		{RingBytes: 3 << 12},
		{RingBytes: 4096, Window: 16384},
	} {
		if _, err := Open(os.Getpid(), opt); err == nil {
			t.Errorf("Open(%+v) succeeded", opt)
		}
	}
}

// TestRefusedMessage checks the classification of kernel refusals and that
// every message names a way out.
func TestRefusedMessage(t *testing.T) {
	for _, e := range []*RefusedError{
		{Why: RefusedParanoid, Paranoid: 3, Err: unix.EACCES},
		{Why: RefusedPermission, PID: 42, Paranoid: 2, Err: unix.EACCES},
		{Why: RefusedFiltered, Err: unix.EPERM},
		{Why: RefusedUnsupported, Err: unix.ENOSYS},
		{Why: RefusedMlock, MlockKB: 516, Err: unix.EPERM},
	} {
		msg := e.Error()
		if n := bytes.Count([]byte(msg), []byte("\n")); n > 1 {
			t.Errorf("%q: %d lines", msg, n+1)
		}
		if !bytes.Contains([]byte(msg), []byte("--backend ptrace")) {
			t.Errorf("%q does not name the way out", msg)
		}
	}
	s := &Source{pid: 1}
	if err := s.refused(unix.ENOENT, false); !isRefusal(err, RefusedUnsupported) {
		t.Errorf("ENOENT: %v", err)
	}
	if err := s.refused(unix.EPERM, true); !isRefusal(err, RefusedMlock) {
		t.Errorf("mmap EPERM: %v", err)
	}
}

func isRefusal(err error, why Refusal) bool {
	var re *RefusedError
	return errors.As(err, &re) && re.Why == why
}

// TestExecAndDlopen samples testdata/execer.c, which execs itself and then
// dlopen()s libm and spins in cos(): a round reports Exec and ends there,
// with no sample (those before the exec lost their address space, those
// after are the next round's: the engine reloads the address space between
// rounds), sampling goes on in the new program, and the first sample after
// each of the two address space changes carries MapsChanged, before any
// sample in libm.
func TestExecAndDlopen(t *testing.T) {
	bin := buildC(t, "execer")
	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	s := openOrSkip(t, tg.PID(), Options{Rate: 499})
	var samples []backend.Sample
	var exec bool
	afterExec := -1 // index of the first sample of a round after the Exec one
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	for ctx.Err() == nil {
		n := len(samples)
		r, err := s.Next(ctx, func(sm *backend.Sample) {
			c := *sm
			c.Stack = nil
			samples = append(samples, c)
		})
		if r.Exec {
			if len(samples) > n {
				t.Errorf("the round with Exec yielded %d samples, want none", len(samples)-n)
			}
			afterExec = len(samples)
		}
		exec = exec || r.Exec
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
	}
	if !exec {
		t.Fatal("no round reported Exec")
	}
	maps, err := procmaps.ReadMaps(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	inLibm := func(pc uint64) bool {
		for _, m := range maps {
			if m.IsExec() && m.Contains(pc) && strings.Contains(m.Path, "libm") {
				return true
			}
		}
		return false
	}
	var changed []int
	firstLibm := -1
	for i, sm := range samples {
		if sm.MapsChanged {
			changed = append(changed, i)
		}
		if firstLibm < 0 && inLibm(sm.Regs.PC) {
			firstLibm = i
		}
	}
	t.Logf("%d samples, MapsChanged at %v, first in libm at %d", len(samples), changed, firstLibm)
	if firstLibm < 0 {
		t.Fatal("no sample in libm after the dlopen")
	}
	if afterExec >= len(samples) || !samples[afterExec].MapsChanged {
		t.Errorf("the first sample after the Exec round (%d of %d) has no MapsChanged", afterExec, len(samples))
	}
	if len(changed) < 2 || changed[len(changed)-1] > firstLibm {
		t.Errorf("MapsChanged at %v: want the exec and the dlopen, before the first sample in libm (%d)", changed, firstLibm)
	}
}

// TestCloseReleasesEverything: after Close every event's file descriptor
// and the pidfd are closed, and a second Close is harmless.
func TestCloseReleasesEverything(t *testing.T) {
	tg := targets.Start(t, "split-fp")
	s := openOrSkip(t, tg.PID(), Options{})
	fds := []int{s.pidfd}
	for _, r := range s.rings {
		fds = append(fds, r.fd)
	}
	for _, f := range s.opened {
		fds = append(fds, f...)
	}
	if st := s.Stats(); st.Events != len(fds)-1 || st.Rings != len(s.cpus) {
		t.Errorf("Stats %+v, want %d events and %d rings", st, len(fds)-1, len(s.cpus))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Errorf("fd %d still open after Close", fd)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Next(context.Background(), func(*backend.Sample) {}); err == nil {
		t.Error("Next after Close succeeded")
	}
	// The target still runs.
	p0, _ := tg.Progress()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p1, _ := tg.Progress(); p1 > p0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target progress stuck at %d for 5 s after Close", p0)
		}
	}
}

// TestCancelDrains: a cancelled ctx still yields what the rings hold.
func TestCancelDrains(t *testing.T) {
	tg := targets.Start(t, "split-fp")
	s := openOrSkip(t, tg.PID(), Options{Rate: 999})
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	_, err := s.Next(ctx, func(*backend.Sample) { n++ })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v", err)
	}
	if n == 0 {
		t.Error("no samples yielded from the rings when ctx ended")
	}
}

// TestExecFromThread samples testdata/threadexec.c, whose second thread
// calls execve: that thread takes over the PID and the events opened for
// the old program's threads are replaced, so the new program's only thread
// is sampled like any other (not only by what survives of the old events),
// no event is left open for the threads of before, and the rings, whose
// owning thread is gone, still wake Next at their watermark.
func TestExecFromThread(t *testing.T) {
	bin := buildC(t, "threadexec")
	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	s := openOrSkip(t, tg.PID(), Options{Rate: 999, RingBytes: 512 << 10})
	// Two rounds past the exec (200 ms after start) close what belonged
	// to the old threads; then count the new program's samples.
	if _, _, err := collect(t, s, 500*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := loadSyms(t, tg.PID(), bin)
	samples, round, err := collect(t, s, 1200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := 0
	for _, sm := range samples {
		if sm.TID == tg.PID() && st.name(sm.Regs.PC) == "after_exec" {
			after++
		}
	}
	stats := s.Stats()
	t.Logf("%d samples in 1.2 s, %d in after_exec, %d lost; %d execs, %d events open", len(samples), after, round.Lost, stats.Execs, stats.Events)
	if stats.Execs != 1 {
		t.Errorf("Stats.Execs = %d, want 1", stats.Execs)
	}
	// The spinning thread gets at least a few percent of a CPU even on a
	// loaded machine: 999 Hz x 1.2 s x 5%.
	if after < 60 {
		t.Errorf("only %d samples in after_exec in 1.2 s at 999 Hz", after)
	}
	if stats.Events != len(s.cpus) {
		t.Errorf("%d events open for 1 thread x %d CPUs", stats.Events, len(s.cpus))
	}
	// The rings are the 512 KiB a user without CAP_PERFMON gets (31
	// samples of the default window): the old main thread that owned
	// them is gone, and unless Next polls another event writing into
	// them, nothing wakes it at the half-ring watermark and most samples
	// are lost.
	if round.Lost > int64(len(samples))/4 {
		t.Errorf("%d samples lost, %d taken: the rings' watermark does not wake Next after the exec", round.Lost, len(samples))
	}
}

// TestChildrenNotFollowed samples testdata/forker.c, which forks a busy
// child after Open: the events are inherited by threads only
// (inherit_thread), so the child's samples do not fill the rings to be
// dropped, while the parent's are taken.
func TestChildrenNotFollowed(t *testing.T) {
	bin := buildC(t, "forker")
	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	s := openOrSkip(t, tg.PID(), Options{Rate: 999})
	if s.attr.Bits&inheritThread == 0 {
		t.Skip("the kernel has no inherit_thread (Linux < 5.13): children inherit the events")
	}
	samples, _, err := collect(t, s, 1500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	parent := 0
	for _, sm := range samples {
		if sm.TID == tg.PID() {
			parent++
		}
	}
	st := s.Stats()
	t.Logf("%d samples, %d of the parent; %d of other processes dropped", len(samples), parent, st.OtherProcs)
	if parent < 50 {
		t.Errorf("only %d samples of the spinning parent in 1.5 s at 999 Hz", parent)
	}
	if st.OtherProcs > 5 {
		t.Errorf("%d samples of the forked child reached the rings", st.OtherProcs)
	}
}

// TestOpenFailureCountedOnce: a thread whose events cannot be opened
// (EMFILE: out of file descriptors) counts one failure, not one per round,
// is not retried at every round, and is opened once descriptors are free
// again.
func TestOpenFailureCountedOnce(t *testing.T) {
	bin := buildC(t, "busy")
	tg := targets.StartCommand(t, bin, "1")
	<-tg.Ready()
	s := openOrSkip(t, tg.PID(), Options{Rate: 99, Interval: 20 * time.Millisecond})
	if len(s.cpus) < 2 {
		t.Skip("needs 2 CPUs: a thread's open then fails after its first event")
	}
	// Forget the busy thread's events, as if it had appeared unseen.
	var tid int
	for id, fds := range s.opened {
		if len(fds) == 0 {
			continue // the main thread's events own the rings
		}
		tid = id
		for _, fd := range fds {
			unix.Close(fd)
			delete(s.ringOf, fd)
		}
	}
	if tid == 0 {
		t.Fatal("no thread with events of its own")
	}
	delete(s.opened, tid)
	delete(s.covered, tid)
	// Leave one free descriptor (the task directory's listing takes it
	// for a moment): the thread's first event opens, the second fails.
	probe, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(probe)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	restore := func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) }
	t.Cleanup(restore)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(probe) + 1, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	_, round, err := collect(t, s, 600*time.Millisecond, nil)
	restore()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("30 rounds out of descriptors: failed %d (%v)", round.Failed, round.Err)
	if round.Failed != 1 || !errors.Is(round.Err, unix.EMFILE) {
		t.Errorf("failed %d, last %v: want 1 EMFILE", round.Failed, round.Err)
	}
	// Retried now and then: opened within a retry interval of the limit's
	// restoration.
	if _, _, err := collect(t, s, 1500*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); !s.covered[tid] || st.Events != 2*len(s.cpus) {
		t.Errorf("thread %d not opened again after descriptors were freed: covered %v, %d events", tid, s.covered[tid], st.Events)
	}
}
