package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// openPTY returns a new pty pair (master, slave) from /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	return m, s
}

// screenLog collects what a program writes to a pty, as a terminal would
// (without answering any query).
type screenLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	drained chan struct{} // closed when drain ends: the pty hung up
}

func (l *screenLog) drain(m *os.File) {
	defer close(l.drained)
	b := make([]byte, 4096)
	for {
		n, err := m.Read(b)
		l.mu.Lock()
		l.buf.Write(b[:n])
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// final is the whole output, once the program exited and its pty was
// drained (or after timeout): what it wrote last may still be in the pty
// when Wait returns.
func (l *screenLog) final(timeout time.Duration) string {
	select {
	case <-l.drained:
	case <-time.After(timeout):
	}
	return l.String()
}

func (l *screenLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startTopPTY starts `stacktop top -p pid --rate rate` on a new pty, as
// the session leader of a session of its own, with the pty as its
// controlling terminal if ctty. It returns the master side (whose output
// screen collects) and a channel that gets cmd.Wait's result.
func startTopPTY(t *testing.T, pid int, rate string, ctty bool) (cmd *exec.Cmd, master *os.File, screen *screenLog, done chan error) {
	t.Helper()
	return startTopPTYWith(t, stacktopBin, nil, pid, rate, ctty)
}

// startTopPTYWith is startTopPTY with another stacktop binary and more
// environment.
func startTopPTYWith(t *testing.T, bin string, env []string, pid int, rate string, ctty bool) (cmd *exec.Cmd, master *os.File, screen *screenLog, done chan error) {
	t.Helper()
	master, slave := openPTY(t)
	cmd = exec.Command(bin, "top", "-p", fmt.Sprint(pid), "--rate", rate)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.Env = append(append(os.Environ(), "TERM=xterm-256color"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: ctty, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	screen = &screenLog{drained: make(chan struct{})}
	go screen.drain(master)
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, master, screen, done
}

func tracedBy(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var tracer int
	if i := bytes.Index(b, []byte("TracerPid:")); i >= 0 {
		fmt.Sscan(string(b[i+len("TracerPid:"):]), &tracer)
	}
	return tracer
}

// TestTopTerminalHangup runs `stacktop top` on a real pty that answers no
// terminal query, waits until it traces the target and draws, then closes
// the pty's master, as a terminal emulator that is closed does. stacktop
// must leave the target untraced and running, and exit. Run both as the
// pty's session leader (the kernel sends SIGHUP) and without a controlling
// terminal (no SIGHUP: only the hang-up on its stdin/stdout tells).
func TestTopTerminalHangup(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	for _, ctty := range []bool{true, false} {
		name := "session-leader-SIGHUP"
		if !ctty {
			name = "no-controlling-tty"
		}
		t.Run(name, func(t *testing.T) {
			cmd, master, screen, done := startTopPTY(t, tg.PID(), "49", ctty)
			defer master.Close()
			defer func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					<-done
				}
			}()

			// The UI drew a frame and the target is traced.
			deadline := time.Now().Add(20 * time.Second)
			for !(strings.Contains(screen.String(), "samples") && tracedBy(tg.PID()) != 0) {
				if time.Now().After(deadline) {
					s := screen.String()
					t.Fatalf("top never drew and traced the target; screen ends:\n%q", s[max(0, len(s)-300):])
				}
				time.Sleep(50 * time.Millisecond)
			}
			// No terminal query was sent: nothing waits for an answer.
			if s := screen.String(); strings.Contains(s, "\x1b]11;?") || strings.Contains(s, "\x1b[6n") {
				t.Errorf("stacktop queried the terminal: %q", s[:min(len(s), 80)])
			}

			master.Close()
			select {
			case err := <-done:
				t.Logf("stacktop exited: %v", err)
			case <-time.After(15 * time.Second):
				t.Fatalf("stacktop still running 15 s after its terminal closed")
			}
			checkUntraced(t, tg.PID())
			if !tg.MakesProgress(5 * time.Second) {
				t.Errorf("target stuck after the hang-up")
			}
		})
	}
}

// TestTopSignals sends SIGTERM or SIGINT to `stacktop top` at a random
// moment, 50 times (while it starts, attaches, draws, samples): it must
// exit, the target untraced, every time. One signal path: stacktop's own
// handler ends the UI through its context (Bubble Tea's handler, which
// raced it, is off); a hang here was 11 runs in 30.
func TestTopSignals(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range 20 {
		sig := syscall.SIGTERM
		if i%2 == 1 {
			sig = syscall.SIGINT
		}
		cmd, master, screen, done := startTopPTY(t, tg.PID(), "99", true)
		delay := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
		time.Sleep(delay)
		cmd.Process.Signal(sig)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
			master.Close()
			s := screen.String()
			t.Fatalf("run %d: stacktop top still running 15 s after %v sent %v into it; screen ends:\n%q", i, sig, delay, s[max(0, len(s)-300):])
		}
		master.Close()
		// The target is let go at once: a tracer that exited cannot hold it.
		if tr := tracedBy(tg.PID()); tr != 0 {
			t.Errorf("run %d: target still traced by %d after top exited", i, tr)
		}
	}
	checkUntraced(t, tg.PID())
}

// TestTopEnginePanic: a panic in top's sampling goroutine (made by a
// build with the stacktop_testhooks tag: no input causes one) ends the
// UI the ordinary way: the terminal is restored, the panic printed, the
// target let go, exit 5. Before, the panic ended the program from that
// goroutine, past every clean-up: exit 2, the terminal left in the
// alternate screen.
func TestTopEnginePanic(t *testing.T) {
	t.Parallel()
	needRoot(t)
	bin := filepath.Join(t.TempDir(), "stacktop-hooks")
	if out, err := exec.Command("go", "build", "-tags", "stacktop_testhooks", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags stacktop_testhooks: %v\n%s", err, out)
	}
	tg := targets.Start(t, "split-sframe3")
	cmd, master, screen, done := startTopPTYWith(t, bin, []string{"STACKTOP_TEST_ENGINE_PANIC=1s"}, tg.PID(), "49", true)
	defer master.Close()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("stacktop still running 30 s after its engine panicked")
	}
	s := screen.final(5 * time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitTopSampler {
		t.Errorf("exit %v, want %d; screen ends:\n%q", err, exitTopSampler, s[max(0, len(s)-400):])
	}
	alt := strings.LastIndex(s, "\x1b[?1049h")
	if alt < 0 || !strings.Contains(s[alt:], "\x1b[?1049l") {
		t.Errorf("the terminal was left in the alternate screen")
	}
	if !strings.Contains(s, "the sampler failed") || !strings.Contains(s, "STACKTOP_TEST_ENGINE_PANIC") {
		t.Errorf("the panic was not reported; screen ends:\n%q", s[max(0, len(s)-400):])
	}
	checkUntraced(t, tg.PID())
}
