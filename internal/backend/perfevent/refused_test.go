//go:build linux

package perfevent

import (
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
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// childEnv makes the test binary, re-executed, open events on the PID in
// PERFEVENT_TEST_PID after the restriction it names and print the result.
const childEnv = "PERFEVENT_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(refusedChild(mode))
	}
	os.Exit(m.Run())
}

func refusedChild(mode string) int {
	if mode == "seccomp" {
		if err := denyPerfEventOpen(); err != nil {
			fmt.Println("setup:", err)
			return 2
		}
	}
	pid, _ := strconv.Atoi(os.Getenv("PERFEVENT_TEST_PID"))
	opt := Options{}
	if mode == "self999" {
		pid, opt.Rate = os.Getpid(), 999
	}
	s, err := Open(pid, opt)
	if err == nil {
		fmt.Printf("opened ring=%d\n", s.Stats().RingBytes)
		s.Close()
		return 0
	}
	var re *RefusedError
	if errors.As(err, &re) {
		fmt.Printf("why=%d\n%s\n", re.Why, err)
		return 0
	}
	fmt.Printf("other: %v\n", err)
	return 0
}

// denyPerfEventOpen installs a seccomp filter on every thread that makes
// perf_event_open fail with EPERM, as a container runtime's default
// profile does.
func denyPerfEventOpen() error {
	const (
		retErrno = 0x00050000 // SECCOMP_RET_ERRNO
		retAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
	)
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_PERF_EVENT_OPEN},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return errno
	}
	return nil
}

func runChild(t *testing.T, mode string, cred *syscall.Credential) string {
	t.Helper()
	bin := os.Args[0]
	if cred != nil {
		// The unprivileged child must be able to run the test binary.
		dir, err := os.MkdirTemp("", "perfevent")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		dst := filepath.Join(dir, "perfevent.test")
		in, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(out, in)
		in.Close()
		out.Close()
		bin = dst
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "PERFEVENT_TEST_PID="+strconv.Itoa(os.Getpid()))
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, b)
	}
	return string(b)
}

// TestRefusedSeccomp: with perf_event_open filtered to EPERM while the
// caller holds the capabilities, the refusal names a seccomp profile.
func TestRefusedSeccomp(t *testing.T) {
	if !hasPerfmon() {
		t.Skip("needs CAP_PERFMON or root to tell a filter from a permission refusal")
	}
	out := runChild(t, "seccomp", nil)
	if !strings.HasPrefix(out, fmt.Sprintf("why=%d\n", RefusedFiltered)) || !strings.Contains(out, "seccomp") {
		t.Errorf("child said:\n%s", out)
	}
	t.Logf("message: %s", strings.SplitN(out, "\n", 2)[1])
}

// TestRefusedUnprivileged: a user without CAP_PERFMON may not sample
// another user's process (this test's, run as root).
func TestRefusedUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a child as nobody")
	}
	out := runChild(t, "plain", &syscall.Credential{Uid: 65534, Gid: 65534})
	if strings.HasPrefix(out, "opened") {
		t.Skip("perf_event_paranoid lets any user sample any process here")
	}
	if !strings.HasPrefix(out, fmt.Sprintf("why=%d\n", RefusedPermission)) && !strings.HasPrefix(out, fmt.Sprintf("why=%d\n", RefusedParanoid)) {
		t.Errorf("child said:\n%s", out)
	}
	t.Logf("message: %s", strings.SplitN(out, "\n", 2)[1])
}

// TestUnprivilegedSelf: a user without capabilities may sample its own
// process at 999 Hz: the default rings shrink to fit perf_event_mlock_kb.
func TestUnprivilegedSelf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a child as nobody")
	}
	sys, err := procmaps.ReadPerfEventSysctls()
	if err != nil || sys.Paranoid > 2 {
		t.Skipf("perf_event_paranoid %d forbids unprivileged sampling (%v)", sys.Paranoid, err)
	}
	out := runChild(t, "self999", &syscall.Credential{Uid: 65534, Gid: 65534})
	if !strings.HasPrefix(out, "opened") {
		t.Errorf("child said:\n%s", out)
	}
	t.Log(strings.TrimSpace(out))
}
