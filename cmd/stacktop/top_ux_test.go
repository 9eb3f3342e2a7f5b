package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTopHeaderAndThreadStacks runs top on a command whose argument holds
// a newline and a terminal escape: the header shows them escaped on one
// line, names the mode and the rate asked; Enter on a thread shows its
// stacks.
func TestTopHeaderAndThreadStacks(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (scripts/install-test-deps.sh installs it)")
	}
	session := fmt.Sprintf("stacktop-topux-%d", os.Getpid())
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", session}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// The shell's $'...' is not POSIX: printf makes the argument.
	tmux("new-session", "-d", "-x", "100", "-y", "24", "-s", session,
		fmt.Sprintf(`%s top --idle --rate 49 -- /bin/sh -c 'sleep 4; :' "$(printf 'two\nlines\033[2J')"; echo top-exited-$?; sleep 30`, stacktopBin))
	defer exec.Command("tmux", "-L", session, "kill-server").Run()
	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		var s string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if s = screen(); ok(s) {
				return s
			}
		}
		t.Fatalf("screen never showed %s:\n%s", what, s)
		return ""
	}
	s := waitFor("samples", func(s string) bool { return samplesShown(s) > 0 })
	lines := strings.Split(s, "\n")
	if !strings.HasPrefix(lines[0], "stacktop top") || !strings.Contains(lines[0], `two\nlines\x1b[2J`) {
		t.Errorf("header line 0 does not show the argv escaped on one line:\n%s", s)
	}
	if !strings.Contains(lines[1], "wall-clock") || !strings.Contains(lines[1], "of 49 Hz") {
		t.Errorf("header line 1 lacks the mode and the rate asked:\n%s", s)
	}

	tmux("send-keys", "-t", session, "3")
	waitFor("the threads view", func(s string) bool { return strings.Contains(s, "LATEST STACK") })
	tmux("send-keys", "-t", session, "Enter")
	s = waitFor("the thread's stacks", func(s string) bool { return strings.Contains(s, "stacks of thread") })
	if !strings.Contains(s, "CALLER > CALLEE") {
		t.Errorf("Enter on a thread did not show its call tree:\n%s", s)
	}
	// top -- CMD waits for the command after q; it ends 4 s after start.
	tmux("send-keys", "-t", session, "q")
	waitFor("stacktop to exit", func(s string) bool { return strings.Contains(s, "top-exited-0") })
}

// TestTopSeveralProcesses: top -p A,B --thread-name shows the matching
// threads of both processes.
func TestTopSeveralProcesses(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (scripts/install-test-deps.sh installs it)")
	}
	a, b := startThreadnames(t), startThreadnames(t)
	session := fmt.Sprintf("stacktop-topmulti-%d", os.Getpid())
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", session}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-x", "100", "-y", "24", "-s", session,
		fmt.Sprintf(`%s top --idle -p %d,%d --thread-name '^hot$'; echo top-exited-$?; sleep 30`, stacktopBin, a.PID(), b.PID()))
	defer exec.Command("tmux", "-L", session, "kill-server").Run()
	tmux("send-keys", "-t", session, "3")
	var s string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		s = tmux("capture-pane", "-p", "-t", session)
		if strings.Count(s, " hot ") == 2 {
			break
		}
	}
	if n := strings.Count(s, " hot "); n != 2 || strings.Contains(s, " warm ") {
		t.Errorf("threads view shows %d threads named hot (want one per process) or other threads:\n%s", n, s)
	}
	tmux("send-keys", "-t", session, "q")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(s, "top-exited-"); time.Sleep(100 * time.Millisecond) {
		s = tmux("capture-pane", "-p", "-t", session)
	}
	if !strings.Contains(s, "top-exited-0") {
		t.Errorf("top did not exit with 0:\n%s", s)
	}
	checkUntraced(t, a.PID())
	checkUntraced(t, b.PID())
}

// TestTopSubprocesses: top --subprocesses -- CMD shows the threads of a
// child the command starts after the attach.
func TestTopSubprocesses(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (scripts/install-test-deps.sh installs it)")
	}
	bin := threadnames(t)
	session := fmt.Sprintf("stacktop-topsub-%d", os.Getpid())
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", session}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-x", "100", "-y", "24", "-s", session,
		fmt.Sprintf(`%s top --idle --subprocesses -- /bin/sh -c 'sleep 0.3; "$0" 4' %s; echo top-exited-$?; sleep 30`, stacktopBin, bin))
	defer exec.Command("tmux", "-L", session, "kill-server").Run()
	tmux("send-keys", "-t", session, "3")
	var s string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if s = tmux("capture-pane", "-p", "-t", session); strings.Contains(s, " waker ") {
			break
		}
	}
	if !strings.Contains(s, " hot ") || !strings.Contains(s, " waker ") {
		t.Errorf("the child's threads are not shown:\n%s", s)
	}
	tmux("send-keys", "-t", session, "q")
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !strings.Contains(s, "top-exited-"); time.Sleep(100 * time.Millisecond) {
		s = tmux("capture-pane", "-p", "-t", session)
	}
	if !strings.Contains(s, "top-exited-0") {
		t.Errorf("top did not exit with 0:\n%s", s)
	}
}
