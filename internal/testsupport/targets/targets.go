package targets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ReadyTimeout bounds how long Start waits for a target's "ready" line and
// how long Stop and Cont wait for the thread states to change.
var ReadyTimeout = 30 * time.Second

// progressEnv names the file a target rewrites with its progress counter.
const progressEnv = "STACKTOP_PROGRESS"

// binDir is where the built targets live, relative to the module root.
var binDir = filepath.Join("testdata", "targets", "bin")

// Path returns the file name of the prebuilt target NAME (for example
// "chains-sframe3"), found by walking up from the working directory to the
// directory holding go.mod. If there is no go.mod above, it returns the path
// relative to the working directory, which then does not exist.
func Path(name string) string {
	root, err := ModuleRoot()
	if err != nil {
		return filepath.Join(binDir, name)
	}
	return filepath.Join(root, binDir, name)
}

// ModuleRoot returns the nearest directory at or above the working directory
// that holds a go.mod file.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("targets: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("targets: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// Target is a running test program started by Start.
type Target struct {
	tb       testing.TB
	name     string
	pid      int
	progress string // file the target rewrites with its counter

	out     LockedBuffer  // stdout and stderr, for failure messages
	done    chan struct{} // closed once the process has been reaped
	ready   chan struct{} // closed when "ready" was read
	drained chan struct{} // closed when all of the target's output was read
}

// Start runs the target NAME with args, waits until it prints "ready" and
// arranges for it to be killed when the test ends. It fails the test (with
// the target's output) if the binary is missing, the target exits first or
// "ready" does not come within ReadyTimeout.
func Start(tb testing.TB, name string, args ...string) *Target {
	tb.Helper()
	path := Path(name)
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("targets: %s: %v (run scripts/build-targets.sh)", name, err)
	}
	t := start(tb, name, path, args)

	timer := time.NewTimer(ReadyTimeout)
	defer timer.Stop()
	select {
	case <-t.ready:
		return t
	case <-t.done:
		// A target that prints "ready" and exits at once (exiter) may be
		// seen exiting first: its output is read by another goroutine.
		select {
		case <-t.drained:
		case <-time.After(time.Second):
		}
		select {
		case <-t.ready:
			return t
		default:
		}
		tb.Fatalf("targets: %s exited before it was ready\noutput:\n%s", name, t.out.String())
	case <-timer.C:
		tb.Fatalf("targets: %s not ready after %v\noutput:\n%s", name, ReadyTimeout, t.out.String())
	}
	return nil
}

// StartCommand runs any program, argv[0] looked up in PATH, the way Start
// runs a target (through a shell, so it is not our child) and arranges for
// it to be killed when the test ends. It does not wait for a "ready" line:
// Ready is closed if the program prints one. Progress works only for
// programs that honour STACKTOP_PROGRESS.
func StartCommand(tb testing.TB, argv ...string) *Target {
	tb.Helper()
	if len(argv) == 0 {
		tb.Fatalf("targets: StartCommand without a program")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		tb.Fatalf("targets: %v", err)
	}
	return start(tb, filepath.Base(argv[0]), path, argv[1:])
}

// Ready is closed when the target has printed a line that is exactly
// "ready".
func (t *Target) Ready() <-chan struct{} { return t.ready }

// start runs path with args in the background of a shell and returns once
// its PID is known.
func start(tb testing.TB, name, path string, args []string) *Target {
	tb.Helper()
	t := &Target{
		tb:       tb,
		name:     name,
		progress: filepath.Join(tb.TempDir(), "progress"),
		done:     make(chan struct{}),
		ready:    make(chan struct{}),
		drained:  make(chan struct{}),
	}
	// The target must not be our child. A tracer in this process waits for
	// its tracees with wait4(-1, __WALL), and a wait4(pid) that os/exec
	// runs for a child on another thread would steal the ptrace stops of
	// the child's main thread (any thread of a process may reap events of
	// the process's children and tracees). So a shell starts the target in
	// the background, reports its PID on fd 3 and exits: the target is
	// reparented, and its end is watched through a pidfd instead.
	pidR, pidW, err := os.Pipe()
	if err != nil {
		tb.Fatalf("targets: %v", err)
	}
	sh := exec.Command("/bin/sh", append([]string{"-c", `"$0" "$@" 3>&- & echo $! >&3`, path}, args...)...)
	sh.Env = append(os.Environ(), progressEnv+"="+t.progress)
	// Real files, not writers: os/exec would wait in Wait for its copying
	// goroutine, that is for the target, which keeps the pipes open.
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatalf("targets: %v", err)
	}
	sh.Stdout, sh.Stderr = outW, outW
	sh.ExtraFiles = []*os.File{pidW}
	if err := sh.Start(); err != nil {
		tb.Fatalf("targets: %s: %v", name, err)
	}
	pidW.Close()
	outW.Close()
	go func() {
		io.Copy(&readyWriter{out: &t.out, ready: t.ready}, outR)
		outR.Close()
		close(t.drained)
	}()
	var pidLine [32]byte
	n, _ := io.ReadFull(pidR, pidLine[:])
	pidR.Close()
	if err := sh.Wait(); err != nil {
		tb.Fatalf("targets: starting %s: %v\n%s", name, err, t.out.String())
	}
	t.pid, err = strconv.Atoi(strings.TrimSpace(string(pidLine[:n])))
	if err != nil {
		tb.Fatalf("targets: starting %s: no pid from the shell: %q", name, pidLine[:n])
	}
	pidfd, err := unix.PidfdOpen(t.pid, 0)
	if err == unix.ESRCH {
		// Exited (and reaped by its new parent) already.
		close(t.done)
		tb.Cleanup(t.kill)
		return t
	}
	if err != nil {
		tb.Fatalf("targets: pidfd of %s (%d): %v", name, t.pid, err)
	}
	go func() {
		defer unix.Close(pidfd)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || err != unix.EINTR {
				break
			}
		}
		close(t.done)
	}()
	tb.Cleanup(t.kill)
	return t
}

// readyWriter receives the target's stdout: it keeps a copy in out and
// closes ready at the first line that is exactly "ready".
type readyWriter struct {
	out     *LockedBuffer
	ready   chan struct{}
	partial []byte
	seen    bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.out.Write(p)
	if w.seen {
		return len(p), nil
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.partial[:i]
		w.partial = w.partial[i+1:]
		if string(line) == "ready" {
			w.seen = true
			w.partial = nil
			close(w.ready)
			return len(p), nil
		}
	}
}

// kill ends the target (stopped or not) and waits until it is reaped.
func (t *Target) kill() {
	select {
	case <-t.done:
		return
	default:
	}
	_ = syscall.Kill(t.pid, syscall.SIGKILL)
	select {
	case <-t.done:
	case <-time.After(ReadyTimeout):
		t.tb.Errorf("targets: %s (pid %d) not reaped after SIGKILL", t.name, t.PID())
	}
}

// PID returns the target's process id.
func (t *Target) PID() int { return t.pid }

// Output returns what the target printed on stdout and stderr so far.
func (t *Target) Output() string { return t.out.String() }

// Done is closed once the target has exited. The target is not our child
// (see Start), so its exit status is not known here.
func (t *Target) Done() <-chan struct{} { return t.done }

// Progress returns the counter the target last published. Targets bump it
// every 10 ms while they run, and publish 0 before printing "ready".
func (t *Target) Progress() (int64, error) {
	b, err := os.ReadFile(t.progress)
	if err != nil {
		return 0, fmt.Errorf("targets: progress of %s: %w", t.name, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("targets: progress of %s: %w", t.name, err)
	}
	return n, nil
}

// MakesProgress reports whether the target's progress counter moves
// within timeout: a target left stopped or traced stays put. The timeout
// is generous because on a loaded machine a target may get little CPU
// (split publishes progress every 40 ms of its own CPU time).
func (t *Target) MakesProgress(timeout time.Duration) bool {
	before, err := t.Progress()
	if err != nil {
		return false
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if now, err := t.Progress(); err == nil && now > before {
			return true
		}
	}
	return false
}

// Stop sends SIGSTOP and returns once every thread is in group-stop (state
// T in /proc/PID/task/TID/stat). It fails the test otherwise.
func (t *Target) Stop() {
	t.tb.Helper()
	if err := syscall.Kill(t.pid, syscall.SIGSTOP); err != nil {
		t.tb.Fatalf("targets: SIGSTOP %s: %v", t.name, err)
	}
	t.waitStates("stopped", func(state byte) bool { return state == 'T' })
}

// Cont sends SIGCONT and returns once no thread is in group-stop any more.
// It fails the test otherwise.
func (t *Target) Cont() {
	t.tb.Helper()
	if err := syscall.Kill(t.pid, syscall.SIGCONT); err != nil {
		t.tb.Fatalf("targets: SIGCONT %s: %v", t.name, err)
	}
	t.waitStates("running", func(state byte) bool { return state != 'T' })
}

// waitStates polls the thread states until ok holds for every thread.
func (t *Target) waitStates(what string, ok func(byte) bool) {
	t.tb.Helper()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		states, err := ThreadStates(t.PID())
		if err != nil {
			t.tb.Fatalf("targets: %s: %v", t.name, err)
		}
		all := len(states) > 0
		for _, s := range states {
			all = all && ok(s)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.tb.Fatalf("targets: %s not %s after %v: thread states %s", t.name, what, ReadyTimeout, formatStates(states))
		}
		time.Sleep(time.Millisecond)
	}
}

// Threads returns the target's threads: thread id to name (comm).
func (t *Target) Threads() (map[int]string, error) {
	return ThreadNames(t.PID())
}

// ThreadNamed returns the id of the target's thread named name (its
// comm), failing the test if there is none.
func (t *Target) ThreadNamed(tb testing.TB, name string) int {
	tb.Helper()
	names, err := t.Threads()
	if err != nil {
		tb.Fatal(err)
	}
	for tid, n := range names {
		if n == name {
			return tid
		}
	}
	tb.Fatalf("no thread named %q in %v", name, names)
	return 0
}

// ThreadNames returns the threads of process pid: thread id to comm. A
// thread that exits while the directory is read is left out.
func ThreadNames(pid int) (map[int]string, error) {
	return readTasks(pid, "comm", func(b []byte) (string, bool) {
		return strings.TrimSuffix(string(b), "\n"), true
	})
}

// ThreadStates returns the state letter (third field of
// /proc/PID/task/TID/stat: R, S, D, T, t, Z, ...) of each thread of pid.
func ThreadStates(pid int) (map[int]byte, error) {
	return readTasks(pid, "stat", parseStatState)
}

// parseStatState returns the state field of a /proc stat line. The command
// name in parentheses may itself hold spaces and ')', so the state is found
// after the last ')'.
func parseStatState(b []byte) (byte, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}

func readTasks[V any](pid int, file string, parse func([]byte) (V, bool)) (map[int]V, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("threads of %d: %w", pid, err)
	}
	m := make(map[int]V, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), file))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("thread %d of %d: %w", tid, pid, err)
		}
		v, ok := parse(b)
		if !ok {
			return nil, fmt.Errorf("thread %d of %d: malformed %s %q", tid, pid, file, b)
		}
		m[tid] = v
	}
	return m, nil
}

func formatStates(states map[int]byte) string {
	count := map[byte]int{}
	for _, s := range states {
		count[s]++
	}
	var parts []string
	for s, n := range count {
		parts = append(parts, fmt.Sprintf("%c:%d", s, n))
	}
	return strings.Join(parts, " ")
}

// LockedBuffer is a bytes.Buffer safe for writer goroutines and readers:
// a target's or a server's output that a test reads while it runs.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// SkipUnlessRunnable skips the test when this kernel cannot execute the
// target NAME at all (a 32-bit program where IA32 emulation is off).
func SkipUnlessRunnable(tb testing.TB, name string) {
	tb.Helper()
	probe := exec.Command(Path(name))
	err := probe.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		tb.Skipf("targets: this kernel cannot execute %s: %v", name, err)
	}
	if err == nil {
		probe.Process.Kill()
		probe.Wait()
	}
}
