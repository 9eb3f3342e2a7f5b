//go:build linux

package ptrace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

func attach(t testing.TB, tr *Tracer, pid int) *Process {
	t.Helper()
	p, err := tr.Attach(pid)
	if err != nil {
		t.Fatalf("Attach(%d): %v", pid, err)
	}
	return p
}

func TestSampleSpinner(t *testing.T) {
	tg := startTarget(t, "spin", "3")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	tids := p.Threads()
	want, _ := procmaps.Threads(tg.pid)
	slices.Sort(want)
	if !slices.Equal(tids, want) {
		t.Fatalf("Threads() = %v, /proc/%d/task = %v", tids, tg.pid, want)
	}
	if len(tids) != 3 {
		t.Fatalf("got %d threads, want 3", len(tids))
	}
	maps := readMaps(t, tg.pid)
	for _, tid := range tids {
		for i := 0; i < 20; i++ {
			s, err := p.Sample(tid, 4096, 0)
			if err != nil {
				t.Fatalf("Sample(%d): %v", tid, err)
			}
			if s.TID != tid || s.Regs.Arch == 0 {
				t.Fatalf("sample of %d: TID %d arch %v", tid, s.TID, s.Regs.Arch)
			}
			pcMap, ok := findMapping(maps, s.Regs.PC)
			if !ok || !strings.Contains(pcMap.perms, "x") {
				t.Fatalf("thread %d: PC %#x not in an executable mapping (%+v)", tid, s.Regs.PC, pcMap)
			}
			spMap, ok := findMapping(maps, s.Regs.SP())
			if !ok || !strings.HasPrefix(spMap.perms, "rw") {
				t.Fatalf("thread %d: SP %#x not in a writable mapping (%+v)", tid, s.Regs.SP(), spMap)
			}
			if tid == tg.pid && spMap.name != "[stack]" {
				t.Fatalf("main thread SP %#x in %+v, want [stack]", s.Regs.SP(), spMap)
			}
			wantLen := min(4096, int(spMap.end-s.Regs.SP()))
			if s.StackAddr != s.Regs.SP() || len(s.Stack) != wantLen || (wantLen == 4096) != (s.StackErr == nil) {
				t.Fatalf("thread %d: stack at %#x len %d err %v", tid, s.StackAddr, len(s.Stack), s.StackErr)
			}
			if s.Total < s.Stopped || s.Stopped <= 0 {
				t.Fatalf("times: stopped %v total %v", s.Stopped, s.Total)
			}
		}
	}

	// A window across the end of the main stack: bounded by stackEnd it
	// stops at the end; unbounded it is a partial read of the same bytes.
	s, err := p.Sample(tg.pid, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	stk, _ := findMapping(maps, s.Regs.SP())
	if want := int(stk.end - s.Regs.SP()); want < 1<<20 {
		if len(s.Stack) != want || s.StackErr == nil {
			t.Errorf("unbounded read across the stack end: got %d bytes, err %v; want %d bytes and an error", len(s.Stack), s.StackErr, want)
		}
		s, err = p.Sample(tg.pid, 1<<20, stk.end)
		if err != nil {
			t.Fatal(err)
		}
		if want := int(stk.end - s.Regs.SP()); len(s.Stack) != want || s.StackErr != nil {
			t.Errorf("bounded read: got %d bytes, err %v; want %d", len(s.Stack), s.StackErr, want)
		}
	}

	// Frozen: the stack read by Sample is the stack in memory.
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	before := cpuTicks(t, tg.pid)
	mem := NewMemory(tg.pid)
	defer mem.Close()
	for _, tid := range tids {
		s, err := p.Sample(tid, 2048, 0)
		if err != nil {
			t.Fatal(err)
		}
		again := make([]byte, len(s.Stack))
		if n, err := mem.ReadAt(again, int64(s.StackAddr)); err != nil || n != len(again) {
			t.Fatalf("ReadAt: %d, %v", n, err)
		}
		if !bytes.Equal(again, s.Stack) {
			t.Fatalf("thread %d: frozen stack changed between Sample and ReadAt", tid)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if after := cpuTicks(t, tg.pid); after != before {
		t.Errorf("frozen process used CPU: %d -> %d ticks", before, after)
	}
	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if after := cpuTicks(t, tg.pid); after == before {
		t.Errorf("thawed process used no CPU in 50ms")
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := p.Detach(); err != nil {
		t.Fatalf("second Detach: %v", err)
	}
	if _, err := p.Sample(tg.pid, 64, 0); !errors.Is(err, ErrDetached) {
		t.Fatalf("Sample after Detach: %v, want ErrDetached", err)
	}
	checkUntraced(t, tg.pid)
	if st := procState(t, tg.pid); st != 'R' && st != 'S' {
		t.Errorf("state after detach %c, want running", st)
	}
}

// TestSignalsNotLost sends signals while every thread is sampled in a
// loop: each SIGUSR1 must reach the handler (the target acks it), and a
// burst of queued real-time signals must arrive complete.
func TestSignalsNotLost(t *testing.T) {
	tg := startTarget(t, "signals")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	stop := make(chan struct{})
	var samples atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var s Sample
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, tid := range p.Threads() {
				if err := p.SampleInto(&s, tid, 1024, 0); err != nil {
					t.Errorf("Sample(%d): %v", tid, err)
					return
				}
				samples.Add(1)
			}
		}
	}()
	const nUSR1, nRT = 300, 200
	ack := make([]byte, 1)
	for i := 0; i < nUSR1; i++ {
		if err := syscall.Kill(tg.pid, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := io.ReadFull(tg.out, ack); done <- err }()
		select {
		case err := <-done:
			if err != nil || ack[0] != 'u' {
				t.Fatalf("ack %d: %q %v", i, ack, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("SIGUSR1 #%d not handled within 5s: lost", i)
		}
	}
	rtsig := syscall.Signal(34 + 6) // glibc SIGRTMIN is 34
	for i := 0; i < nRT; i++ {
		if err := syscall.Kill(tg.pid, rtsig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
	syscall.Kill(tg.pid, syscall.SIGTERM)
	got := strings.TrimSpace(readAllLine(t, tg.out))
	if want := fmt.Sprintf("usr1=%d rt=%d", nUSR1, nRT); got != want {
		t.Fatalf("target counted %q, want %q", got, want)
	}
	t.Logf("%d samples while signalling", samples.Load())
}

// TestAlreadyStopped attaches to a process in group-stop: sampling and
// detaching must leave it stopped, and SIGCONT must still resume it.
func TestAlreadyStopped(t *testing.T) {
	tg := startTarget(t, "spin", "2")
	syscall.Kill(tg.pid, syscall.SIGSTOP)
	waitState(t, tg.pid, "T")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	if !p.WasStopped() {
		t.Error("WasStopped() = false for a stopped process")
	}
	before := cpuTicks(t, tg.pid)
	for i := 0; i < 10; i++ {
		for _, tid := range p.Threads() {
			if _, err := p.Sample(tid, 512, 0); err != nil {
				t.Fatalf("Sample(%d): %v", tid, err)
			}
		}
	}
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if after := cpuTicks(t, tg.pid); after != before {
		t.Errorf("stopped process ran while attached: %d -> %d ticks", before, after)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	tids, _ := procmaps.Threads(tg.pid)
	for _, tid := range tids {
		if st, _ := statField(t, fmt.Sprintf("/proc/%d/task/%d/stat", tg.pid, tid)); st != 'T' {
			t.Errorf("thread %d state %c after detach, want T", tid, st)
		}
	}
	checkUntraced(t, tg.pid)
	syscall.Kill(tg.pid, syscall.SIGCONT)
	waitState(t, tg.pid, "RS")
	time.Sleep(50 * time.Millisecond)
	if after := cpuTicks(t, tg.pid); after == before {
		t.Error("process did not run after SIGCONT")
	}
}

// TestGroupStopWhileAttached: SIGSTOP and SIGCONT from outside while we
// sample. Sampling a group-stopped thread must not resume it.
func TestGroupStopWhileAttached(t *testing.T) {
	tg := startTarget(t, "spin", "2")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	syscall.Kill(tg.pid, syscall.SIGSTOP)
	waitState(t, tg.pid, "tT")
	time.Sleep(20 * time.Millisecond)
	before := cpuTicks(t, tg.pid)
	for i := 0; i < 20; i++ {
		for _, tid := range p.Threads() {
			if _, err := p.Sample(tid, 512, 0); err != nil {
				t.Fatalf("Sample(%d): %v", tid, err)
			}
		}
	}
	time.Sleep(50 * time.Millisecond)
	if after := cpuTicks(t, tg.pid); after != before {
		t.Errorf("group-stopped process ran while sampled: %d -> %d ticks", before, after)
	}
	syscall.Kill(tg.pid, syscall.SIGCONT)
	deadline := time.Now().Add(5 * time.Second)
	for cpuTicks(t, tg.pid) == before {
		if time.Now().After(deadline) {
			t.Fatal("process did not run after SIGCONT while attached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tid := range p.Threads() {
		if _, err := p.Sample(tid, 512, 0); err != nil {
			t.Fatalf("Sample(%d) after SIGCONT: %v", tid, err)
		}
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
	waitState(t, tg.pid, "RS")
}

// TestThreadChurn samples a process that creates and joins threads all
// the time: only ErrThreadExited may escape, and no thread stays traced.
func TestThreadChurn(t *testing.T) {
	tg := startTarget(t, "churn")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	var s Sample
	var ok, exited int
	maxThreads := 0
	deadline := time.Now().Add(1500 * time.Millisecond)
	for round := 0; time.Now().Before(deadline); round++ {
		tids := p.Threads()
		maxThreads = max(maxThreads, len(tids))
		for _, tid := range tids {
			switch err := p.SampleInto(&s, tid, 1024, 0); {
			case err == nil:
				ok++
			case errors.Is(err, ErrThreadExited):
				exited++
			default:
				t.Fatalf("Sample(%d): %v", tid, err)
			}
		}
		if round%20 == 0 {
			if err := p.Freeze(); err != nil {
				t.Fatal(err)
			}
			for _, tid := range p.Threads() {
				if err := p.SampleInto(&s, tid, 1024, 0); err != nil {
					t.Fatalf("frozen Sample(%d): %v", tid, err)
				}
			}
			if err := p.Thaw(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
	if st := procState(t, tg.pid); st == 't' || st == 'T' {
		t.Errorf("state %c after detach", st)
	}
	if maxThreads < 2 || ok == 0 {
		t.Errorf("saw at most %d threads, %d samples: target did not churn", maxThreads, ok)
	}
	t.Logf("%d samples, %d exited, up to %d threads", ok, exited, maxThreads)
}

// TestProcessExits: the target exits while sampled; sampling ends with
// ErrProcessExited and Detach succeeds.
func TestProcessExits(t *testing.T) {
	tg := startTarget(t, "exit", "300")
	tg.reaped = true // we trace our own child: the tracer reaps its exit
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	var s Sample
	deadline := time.Now().Add(10 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no ErrProcessExited within 10s; threads %v", p.Threads())
		}
		var last error
		tids := p.Threads()
		if len(tids) == 0 {
			break // exits were collected between two samples
		}
		for _, tid := range tids {
			last = p.SampleInto(&s, tid, 1024, 0)
			if last != nil && !errors.Is(last, ErrThreadExited) && !errors.Is(last, ErrProcessExited) {
				t.Fatalf("Sample(%d): %v", tid, last)
			}
			if errors.Is(last, ErrProcessExited) {
				break
			}
		}
		if errors.Is(last, ErrProcessExited) {
			break
		}
	}
	if _, err := p.Sample(tg.pid, 64, 0); !errors.Is(err, ErrProcessExited) {
		t.Errorf("Sample after exit: %v", err)
	}
	if err := p.Detach(); err != nil {
		t.Fatalf("Detach after exit: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", tg.pid)); err == nil {
		t.Errorf("pid %d still exists (not reaped)", tg.pid)
	}
}

// TestAttachErrors: each refusal is an *AttachError of its cause, from
// Attach and from AttachLazy alike (which seizes the main thread only).
func TestAttachErrors(t *testing.T) { forModes(t, testAttachErrors) }

func testAttachErrors(t *testing.T, lazy bool) {
	tr := NewTracer()
	defer tr.Close()
	attachFn := tr.Attach
	if lazy {
		attachFn = tr.AttachLazy
	}
	check := func(t *testing.T, pid int, want AttachCause) *AttachError {
		t.Helper()
		p, err := attachFn(pid)
		if err == nil {
			p.Detach()
			t.Fatalf("Attach(%d) succeeded", pid)
		}
		var ae *AttachError
		if !errors.As(err, &ae) || ae.Cause != want {
			t.Fatalf("Attach(%d) = %v (%T), want cause %v", pid, err, err, want)
		}
		if ae.PID != pid || !strings.Contains(ae.Error(), "\n") {
			t.Errorf("error lacks PID or advice: %q", ae.Error())
		}
		t.Logf("%s", ae.Error())
		return ae
	}
	t.Run("nonexistent", func(t *testing.T) {
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Skip(err)
		}
		check(t, cmd.Process.Pid, CauseNoProcess)
	})
	t.Run("self", func(t *testing.T) { check(t, os.Getpid(), CauseSelf) })
	t.Run("own-thread", func(t *testing.T) { check(t, unix.Gettid(), CauseSelf) })
	t.Run("kthreadd", func(t *testing.T) {
		if st, err := procmaps.ReadStat(2, 0); err != nil || st.Flags&pfKthread == 0 {
			t.Skip("pid 2 is not a kernel thread here (PID namespace?)")
		}
		check(t, 2, CauseKernelThread)
	})
	t.Run("zombie", func(t *testing.T) {
		needTarget(t)
		cmd := exec.Command(targetBin, "exit", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		waitState(t, cmd.Process.Pid, "Z")
		check(t, cmd.Process.Pid, CauseZombie)
	})
	t.Run("already-traced", func(t *testing.T) {
		tg := startTarget(t, "spin", "1")
		other := NewTracer()
		defer other.Close()
		attach(t, other, tg.pid)
		ae := check(t, tg.pid, CauseAlreadyTraced)
		if ae.TracerPID != os.Getpid() {
			t.Errorf("TracerPID %d, want %d", ae.TracerPID, os.Getpid())
		}
	})
	t.Run("permission", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to drop to another uid")
		}
		tg := startTarget(t, "spin", "1")
		// The helper runs as nobody: it needs a copy of the test binary it
		// can execute.
		dir, err := os.MkdirTemp("", "ptrace-helper")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o755)
		exe := filepath.Join(dir, "ptrace.test")
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "PTRACE_TEST_HELPER=attach", fmt.Sprintf("PTRACE_TEST_PID=%d", tg.pid),
			fmt.Sprintf("PTRACE_TEST_LAZY=%v", lazy))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper: %v", err)
		}
		var res struct {
			OK         bool   `json:"ok"`
			Cause      int    `json:"cause"`
			UID        int    `json:"uid"`
			TargetUIDs [4]int `json:"target_uids"`
			Cap        bool   `json:"cap"`
			Scope      int    `json:"scope"`
			EPERM      bool   `json:"errno_eperm"`
			Msg        string `json:"msg"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("helper output %q: %v", out, err)
		}
		t.Logf("as uid 65534: %s", res.Msg)
		if res.OK || AttachCause(res.Cause) != CausePermission || !res.EPERM {
			t.Fatalf("attach as nobody: %+v, want CausePermission wrapping EPERM", res)
		}
		if res.UID != 65534 || res.TargetUIDs != [4]int{0, 0, 0, 0} || res.Cap {
			t.Errorf("diagnostics: %+v", res)
		}
		if !strings.Contains(res.Msg, "uid 0") {
			t.Errorf("message does not name the target uid: %q", res.Msg)
		}
		checkUntraced(t, tg.pid)
	})
}

func TestMemoryPartialRead(t *testing.T) {
	tg := startTarget(t, "spin", "1")
	var stack mapping
	for _, m := range readMaps(t, tg.pid) {
		if m.name == "[stack]" {
			stack = m
		}
	}
	if stack.end == 0 {
		t.Skip("no [stack] mapping")
	}
	for _, fallback := range []bool{false, true} {
		mem := NewMemory(tg.pid)
		mem.useFile = fallback
		buf := make([]byte, 256)
		n, err := mem.ReadAt(buf, int64(stack.end-100))
		var me *MemoryError
		if n != 100 || !errors.As(err, &me) || me.Got != 100 {
			t.Errorf("fallback=%v: read across the end of [stack]: n=%d err=%v, want 100 and a *MemoryError", fallback, n, err)
		}
		n, err = mem.ReadAt(buf, int64(stack.end-256))
		if n != 256 || err != nil {
			t.Errorf("fallback=%v: read inside [stack]: %d, %v", fallback, n, err)
		}
		mem.Close()
	}
}

func TestDetachAllFromOtherGoroutine(t *testing.T) {
	a := startTarget(t, "spin", "2")
	b := startTarget(t, "spin", "1")
	tr := NewTracer()
	defer tr.Close()
	pa := attach(t, tr, a.pid)
	attach(t, tr, b.pid)
	if err := pa.Freeze(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() { errc <- tr.DetachAll() }()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, a.pid)
	checkUntraced(t, b.pid)
	waitState(t, a.pid, "RS")
	tr.Close()
	tr.Close()
	if err := tr.DetachAll(); err != nil {
		t.Errorf("DetachAll after Close: %v", err)
	}
	if _, err := tr.Attach(b.pid); !errors.Is(err, ErrTracerClosed) {
		t.Errorf("Attach after Close: %v", err)
	}
}

// tracerWithChild starts a Tracer on a thread that forked a child (true,
// which exits at once) before the tracer took it: where every attempt of
// NewTracer to find a thread without children failed. It returns the
// child, whose exit status is its own (exec.Cmd.Wait).
func tracerWithChild(t *testing.T) (*Tracer, *exec.Cmd) {
	t.Helper()
	tr := newTracer()
	started := make(chan struct{})
	child := exec.Command("true")
	forked := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // fork here, then become the tracer thread
		if err := child.Start(); err != nil {
			forked <- err
			return
		}
		forked <- nil
		tr.loop(started, loopAttempts, nil)
	}()
	if err := <-forked; err != nil {
		t.Fatal(err)
	}
	<-started
	t.Cleanup(tr.Close)
	return tr, child
}

// TestStrayChildNotReaped: the tracer thread has a child of its own
// (tracerWithChild), which exits while we trace; the tracer must leave
// its exit status to its owner, through every kind of wait: attaches, a
// whole process's samples, drains, a lazy dump's polls for any tracee.
func TestStrayChildNotReaped(t *testing.T) {
	tg := startTarget(t, "spin", "2")
	tr, stray := tracerWithChild(t)
	if !tr.strays {
		t.Fatal("a tracer thread with a child does not expect strays")
	}
	waitState(t, stray.Process.Pid, "Z")
	p := attach(t, tr, tg.pid)
	for i := 0; i < 50; i++ {
		for _, tid := range p.Threads() {
			if _, err := p.Sample(tid, 256, 0); err != nil {
				t.Fatalf("Sample(%d): %v", tid, err)
			}
		}
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	checkUntraced(t, tg.pid)
	lazyDumpsLeaveChild(t, tr, tg.pid, 5, stray, "the stray child")
}

// TestTracerThreadNoStrays: NewTracer takes neither the main thread nor a
// thread with children, so its waits need no peek; a child forked by
// another thread that then ends (the kernel gives it to the main
// thread) is not the tracer thread's, and its exit is left to its owner
// while the tracer waits for any tracee.
func TestTracerThreadNoStrays(t *testing.T) {
	tg := startTarget(t, "spin", "2")
	// A pooled thread forks, then ends with its goroutine.
	orphan := exec.Command("true")
	forked := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		forked <- orphan.Start()
	}()
	if err := <-forked; err != nil {
		t.Fatal(err)
	}
	// The kernel gives the orphan to the main thread once its thread
	// ended: the premise of Tracer.strays.
	mainChildren := fmt.Sprintf("/proc/self/task/%d/children", os.Getpid())
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, _ := os.ReadFile(mainChildren)
		if slices.Contains(strings.Fields(string(b)), fmt.Sprint(orphan.Process.Pid)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became the main thread's (%s: %q)", orphan.Process.Pid, mainChildren, b)
		}
		time.Sleep(time.Millisecond)
	}
	tr := NewTracer()
	defer tr.Close()
	if tr.strays || tr.tid == os.Getpid() {
		t.Errorf("tracer thread %d (process %d) expects strays", tr.tid, os.Getpid())
	}
	waitState(t, orphan.Process.Pid, "Z")
	lazyDumpsLeaveChild(t, tr, tg.pid, 5, orphan, "a child of the program")
}

// lazyDumpsLeaveChild dumps pid lazily n times through tr, then lets a
// drain or two run, and requires child's exit status to be still its
// owner's: the tracer's waits must not have taken it.
func lazyDumpsLeaveChild(t *testing.T, tr *Tracer, pid, n int, child *exec.Cmd, what string) {
	t.Helper()
	for i := 0; i < n; i++ {
		p := attachIn(t, tr, pid, true)
		for tid, err := range lazyDump(t, p, nil, nil) {
			if err != nil {
				t.Errorf("thread %d: %v", tid, err)
			}
		}
		detachUntraced(t, p, pid)
	}
	time.Sleep(2 * safetyPoll) // a drain or two
	if err := child.Wait(); err != nil {
		t.Fatalf("%s: its exit was taken from its owner: %v", what, err)
	}
}

// A thread in an uninterruptible sleep (here a vfork parent, until its
// child exits) ignores PTRACE_INTERRUPT until the sleep ends. Sampling and
// detaching must not wait for it (gdb and eu-stack hang there), and the
// thread must come out of its sleep neither stopped nor traced.
func TestUninterruptibleThread(t *testing.T) {
	tg := startTarget(t, "vfork", "3000")
	tr := NewTracer()
	defer tr.Close()
	p := attach(t, tr, tg.pid)
	blocked := -1
	for _, tid := range p.Threads() {
		if s, _ := statField(t, fmt.Sprintf("/proc/%d/task/%d/stat", tg.pid, tid)); s == 'D' {
			blocked = tid
		}
	}
	if blocked < 0 {
		t.Fatal("no thread of the target is in state D")
	}
	results := map[int]error{}
	tids := p.Threads()
	if err := p.SampleEach(tids, 4096, func(i int, s *Sample, err error) bool {
		results[tids[i]] = err
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for tid, err := range results {
		switch {
		case tid == blocked && !errors.Is(err, ErrThreadBlocked):
			t.Errorf("thread %d in state D: sample error %v, want ErrThreadBlocked", tid, err)
		case tid != blocked && err != nil:
			t.Errorf("thread %d: %v", tid, err)
		}
	}
	// Sampled again, it is still blocked (and answers without a new grace).
	if _, err := p.Sample(blocked, 4096, 0); !errors.Is(err, ErrThreadBlocked) {
		t.Errorf("second sample of the blocked thread: %v, want ErrThreadBlocked", err)
	}
	if err := p.Detach(); !errors.Is(err, ErrThreadBlocked) {
		t.Errorf("Detach: %v, want an error that names the blocked thread", err)
	}
	checkUntracedBut(t, tg.pid, blocked)
	// When the child exits the thread wakes, takes its pending stop, and
	// the tracer detaches it: the target runs on.
	for _, want := range []string{"back\n", "done\n"} {
		if line, err := tg.out.ReadString('\n'); err != nil || line != want {
			t.Fatalf("target after the vfork: got %q, %v; want %q", line, err, want)
		}
	}
	waitUntraced(t, tg.pid)
}
