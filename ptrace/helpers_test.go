//go:build linux

package ptrace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/procmaps"
)

var targetBin string // built by TestMain; "" when gcc is missing

func TestMain(m *testing.M) {
	if os.Getenv("PTRACE_TEST_HELPER") == "attach" {
		attachHelper()
		return
	}
	dir, err := os.MkdirTemp("", "ptrace-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "target")
	if out, err := exec.Command("gcc", "-O1", "-g", "-pthread", "-o", bin, "testdata/target.c").CombinedOutput(); err == nil {
		targetBin = bin
	} else {
		fmt.Fprintf(os.Stderr, "gcc failed, target tests will skip: %v\n%s", err, out)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// attachHelper runs in a re-executed test binary (with dropped uid) and
// prints the attach result as JSON.
func attachHelper() {
	pid, _ := strconv.Atoi(os.Getenv("PTRACE_TEST_PID"))
	tr := NewTracer()
	defer tr.Close()
	attach := tr.Attach
	if os.Getenv("PTRACE_TEST_LAZY") == "true" {
		attach = tr.AttachLazy
	}
	p, err := attach(pid)
	if p != nil {
		p.Detach()
	}
	var ae *AttachError
	out := map[string]any{"ok": err == nil}
	if errors.As(err, &ae) {
		out["cause"] = ae.Cause
		out["uid"] = ae.UID
		out["target_uids"] = ae.TargetUIDs
		out["cap"] = ae.CapSysPtrace
		out["scope"] = ae.PtraceScope
		out["errno_eperm"] = errors.Is(err, syscall.EPERM)
		out["msg"] = ae.Error()
	} else if err != nil {
		out["msg"] = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

type target struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	in     io.WriteCloser // the target's stdin, for modes that wait on a line
	pid    int
	reaped bool // the tracer reaped it (it was our child and exited while traced)
}

func needTarget(t testing.TB) {
	t.Helper()
	if targetBin == "" {
		t.Skip("no C compiler: cannot build test targets")
	}
}

// startTarget runs the C target and waits for its "ready" line.
func startTarget(t testing.TB, args ...string) *target {
	t.Helper()
	needTarget(t)
	cmd := exec.Command(targetBin, args...)
	r, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tg := &target{cmd: cmd, out: bufio.NewReader(r), in: in, pid: cmd.Process.Pid}
	t.Cleanup(func() {
		syscall.Kill(tg.pid, syscall.SIGKILL)
		if !tg.reaped {
			cmd.Wait()
		}
	})
	line, err := tg.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("target %v: want ready, got %q, %v", args, line, err)
	}
	return tg
}

func statField(t testing.TB, path string) (state byte, utime uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	return f[0][0], u
}

func procState(t testing.TB, pid int) byte {
	s, _ := statField(t, fmt.Sprintf("/proc/%d/stat", pid))
	return s
}

// waitState polls until /proc/PID/stat shows one of states.
func waitState(t testing.TB, pid int, states string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if strings.IndexByte(states, procState(t, pid)) >= 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pid %d: state %c, want one of %q", pid, procState(t, pid), states)
}

// cpuTicks sums utime+stime of every thread.
func cpuTicks(t testing.TB, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s
}

// checkUntraced fails unless every thread of pid has TracerPid 0.
func checkUntraced(t testing.TB, pid int) {
	t.Helper()
	checkUntracedBut(t, pid, 0)
}

// checkUntracedBut is checkUntraced for every thread but except.
func checkUntracedBut(t testing.TB, pid, except int) {
	t.Helper()
	for _, tid := range tracedThreads(t, pid) {
		if tid != except {
			t.Errorf("pid %d thread %d: still traced after detach", pid, tid)
		}
	}
}

// waitUntraced polls until no thread of pid is traced.
func waitUntraced(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(tracedThreads(t, pid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	checkUntraced(t, pid)
}

// tracedThreads lists the threads of pid whose TracerPid is not 0.
func tracedThreads(t testing.TB, pid int) []int {
	t.Helper()
	tids, err := procmaps.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, tid := range tids {
		st, err := procmaps.ReadStatus(pid, tid)
		if err != nil {
			continue // exited meanwhile
		}
		if st.TracerPID != 0 {
			out = append(out, tid)
		}
	}
	return out
}

type mapping struct {
	start, end uint64
	perms      string
	name       string
}

func readMaps(t testing.TB, pid int) []mapping {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var ms []mapping
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		lo, hi, _ := strings.Cut(f[0], "-")
		s, _ := strconv.ParseUint(lo, 16, 64)
		e, _ := strconv.ParseUint(hi, 16, 64)
		m := mapping{start: s, end: e, perms: f[1]}
		if len(f) > 5 {
			m.name = f[5]
		}
		ms = append(ms, m)
	}
	return ms
}

func findMapping(ms []mapping, addr uint64) (mapping, bool) {
	for _, m := range ms {
		if addr >= m.start && addr < m.end {
			return m, true
		}
	}
	return mapping{}, false
}

func readAllLine(t testing.TB, r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// rtsig is the real-time signal the "signals" target counts (glibc's
// SIGRTMIN is 34); stormRT how many rtStorm sends.
const (
	rtsig   = syscall.Signal(34 + 6)
	stormRT = 2000
)

// rtStorm sends stormRT rtsig signals to pid from a goroutine, a
// millisecond's pause every 50; the channel closes when all are sent.
func rtStorm(t *testing.T, pid int) <-chan struct{} {
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < stormRT; i++ {
			if err := syscall.Kill(pid, rtsig); err != nil {
				t.Error(err)
				return
			}
			if i%50 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return sent
}
