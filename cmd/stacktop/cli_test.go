package main

import (
	"bytes"
	"codeberg.org/stacktop/stacktop/internal/selfsched"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// The CLI's contract with users: exit codes and one- or two-line messages
// that say the cause and what to do. These tests run the real binary.

var stacktopBin string

func TestMain(m *testing.M) {
	// This test binary links package early too, whose init raised its
	// main thread's priority: back to the test's own, so that neither the
	// targets it starts nor the stacktop runs inherit it.
	selfsched.Settle(false)
	dir, err := os.MkdirTemp("", "stacktop-cli")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755) // the permission test runs the binary as nobody
	stacktopBin = filepath.Join(dir, "stacktop")
	if out, err := exec.Command("go", "build", "-o", stacktopBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	// The binaries the tests run keep their DWARF cache here, not in the
	// user's cache directory. Go's build cache stays where it is: under
	// the new XDG_CACHE_HOME, each `go tool pprof` of the tests built
	// pprof again, 30-90 s each.
	if gocache, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		os.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	}
	// So does the test Collector's binary: linked again under a new
	// XDG_CACHE_HOME, it cost each run 10 s.
	if os.Getenv("STACKTOP_OTELCOL_CACHE") == "" {
		if uc, err := os.UserCacheDir(); err == nil {
			os.Setenv("STACKTOP_OTELCOL_CACHE", filepath.Join(uc, "stacktop", "otelcol"))
		}
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func stacktop(t *testing.T, args ...string) result {
	return run(t, exec.Command(stacktopBin, args...))
}

// checkAttachFailure requires exit code 2, no stdout, and a message of at
// most two lines that contains each of the given phrases.
func checkAttachFailure(t *testing.T, r result, phrases ...string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit code %d, want 2; stderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty: %q", r.stdout)
	}
	msg := strings.TrimSpace(r.stderr)
	if n := strings.Count(msg, "\n") + 1; n > 2 {
		t.Errorf("message has %d lines, want at most 2:\n%s", n, msg)
	}
	for _, p := range phrases {
		if !strings.Contains(msg, p) {
			t.Errorf("message lacks %q:\n%s", p, msg)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"nonsense"}, {"dump"}, {"dump", "-p", "x"}, {"dump", "-p", "1", "extra"},
		{"dump", "x"}, {"dump", "0"}, {"dump", "1", "extra"}, {"dump", "-p", "1", "2"}, {"dump", "1", "-p", "2"}, {"sframe"},
		{"dump", "-p", "0x10"}, {"dump", "0x10"}, {"dump", "-p", "+1"}, {"record", "-p", "0x10"}} {
		if r := stacktop(t, args...); r.code != exitUsage {
			t.Errorf("stacktop %v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
	if r := stacktop(t, "help"); r.code != 0 || !strings.Contains(r.stderr, "dump") {
		t.Errorf("help: exit %d, output %q", r.code, r.stderr)
	}
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

func TestDumpNoSuchProcess(t *testing.T) {
	t.Parallel()
	// A PID above pid_max cannot exist.
	r := stacktop(t, "dump", "-p", "99999999")
	checkAttachFailure(t, r, "no such process")
	// pstack's way: the PID alone, flags after it.
	checkAttachFailure(t, stacktop(t, "dump", "99999999", "--no-lines"), "no such process")
}

func TestDumpSelf(t *testing.T) {
	t.Parallel()
	// exec keeps the shell's PID, so $$ is stacktop's own.
	r := run(t, exec.Command("/bin/sh", "-c", `exec "$0" dump -p $$`, stacktopBin))
	checkAttachFailure(t, r, "stacktop itself")
}

func TestDumpKernelThread(t *testing.T) {
	t.Parallel()
	needRoot(t)
	r := stacktop(t, "dump", "-p", "2") // kthreadd
	checkAttachFailure(t, r, "kernel thread")
}

func TestDumpZombie(t *testing.T) {
	t.Parallel()
	needRoot(t)
	// The shell starts a child that exits at once, then becomes a sleep that
	// never reaps it: a zombie.
	parent := exec.Command("/bin/sh", "-c", "/bin/true & exec sleep 30")
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { parent.Process.Kill(); parent.Wait() }()
	var zombie string
	for deadline := time.Now().Add(5 * time.Second); zombie == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent.Process.Pid, parent.Process.Pid))
		for _, pid := range strings.Fields(string(b)) {
			if st, _ := os.ReadFile("/proc/" + pid + "/stat"); bytes.Contains(st, []byte(") Z ")) {
				zombie = pid
			}
		}
	}
	if zombie == "" {
		t.Fatal("no zombie appeared")
	}
	checkAttachFailure(t, stacktop(t, "dump", "-p", zombie), "zombie")
}

func TestDumpPermissionDenied(t *testing.T) {
	t.Parallel()
	needRoot(t)
	target := exec.Command("sleep", "30") // runs as root
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { target.Process.Kill(); target.Wait() }()
	cmd := exec.Command(stacktopBin, "dump", "-p", fmt.Sprint(target.Process.Pid))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	r := run(t, cmd)
	checkAttachFailure(t, r, "permission denied", "uid 0", "uid 65534", "CAP_SYS_PTRACE")
}

func TestSFrameExitCodes(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("..", "..", "sframe", "testdata", "x86_64-v3.exe")
	if r := stacktop(t, "sframe", fixture); r.code != 0 {
		t.Errorf("sframe on an SFrame binary: exit %d\n%s", r.code, r.stderr)
	}
	if r := stacktop(t, "sframe", "/bin/true"); r.code != 1 {
		t.Errorf("sframe on a binary without SFrame: exit %d", r.code)
	}
	if r := stacktop(t, "sframe", "/etc/hostname"); r.code != 2 || r.stderr == "" {
		t.Errorf("sframe on a non-ELF file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Test32BitRefused: dump and record refuse a 32-bit program (exit 2, a
// message saying so) instead of printing stacks of zeros.
func Test32BitRefused(t *testing.T) {
	t.Parallel()
	needRoot(t)
	targets.SkipUnlessRunnable(t, "i386")
	tg := targets.Start(t, "i386")
	pid := strconv.Itoa(tg.PID())
	checkAttachFailure(t, stacktop(t, "dump", "-p", pid), "32-bit program")
	checkAttachFailure(t, stacktop(t, "record", "-p", pid, "--duration", "1s", "-o", filepath.Join(t.TempDir(), "x.pb.gz")), "32-bit program")
}
