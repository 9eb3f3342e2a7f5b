package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTopHeaderAndThreadStacks runs top on a command whose argument holds
// a newline and a terminal escape: the header shows them escaped on one
// line, names the mode and the rate asked; Enter on a thread shows its
// stacks.
func TestTopHeaderAndThreadStacks(t *testing.T) {
	t.Parallel()
	needRoot(t)
	// The shell's $'...' is not POSIX: printf makes the argument.
	term := startTmux(t, "topux", 100, 24,
		fmt.Sprintf(`%s top --idle --rate 49 -- /bin/sh -c 'sleep 4; :' "$(printf 'two\nlines\033[2J')"; echo top-exited-$?; sleep 30`, stacktopBin))
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		return term.waitFor(what, 20*time.Second, ok)
	}
	s := waitFor("samples", func(s string) bool { return samplesShown(s) > 0 })
	lines := strings.Split(s, "\n")
	if !strings.HasPrefix(lines[0], "stacktop top") || !strings.Contains(lines[0], `two\nlines\x1b[2J`) {
		t.Errorf("header line 0 does not show the argv escaped on one line:\n%s", s)
	}
	if !strings.Contains(lines[1], "wall-clock") || !strings.Contains(lines[1], "of 49 Hz") {
		t.Errorf("header line 1 lacks the mode and the rate asked:\n%s", s)
	}

	term.keys("3")
	waitFor("the threads view", func(s string) bool { return strings.Contains(s, "LATEST STACK") })
	term.keys("Enter")
	s = waitFor("the thread's stacks", func(s string) bool { return strings.Contains(s, "stacks of thread") })
	if !strings.Contains(s, "CALLER > CALLEE") {
		t.Errorf("Enter on a thread did not show its call tree:\n%s", s)
	}
	// top -- CMD waits for the command after q; it ends 4 s after start.
	term.keys("q")
	waitFor("stacktop to exit", func(s string) bool { return strings.Contains(s, "top-exited-0") })
}

// TestTopSeveralProcesses: top -p A,B --thread-name shows the matching
// threads of both processes.
func TestTopSeveralProcesses(t *testing.T) {
	t.Parallel()
	needRoot(t)
	needTmux(t)
	a, b := startThreadnames(t), startThreadnames(t)
	term := startTmux(t, "topmulti", 100, 24,
		fmt.Sprintf(`%s top --idle -p %d,%d --thread-name '^hot$'; echo top-exited-$?; sleep 30`, stacktopBin, a.PID(), b.PID()))
	term.keys("3")
	s := term.poll(20*time.Second, func(s string) bool { return strings.Count(s, " hot ") == 2 })
	if n := strings.Count(s, " hot "); n != 2 || strings.Contains(s, " warm ") {
		t.Errorf("threads view shows %d threads named hot (want one per process) or other threads:\n%s", n, s)
	}
	term.keys("q")
	if s := term.poll(10*time.Second, func(s string) bool { return strings.Contains(s, "top-exited-") }); !strings.Contains(s, "top-exited-0") {
		t.Errorf("top did not exit with 0:\n%s", s)
	}
	checkUntraced(t, a.PID())
	checkUntraced(t, b.PID())
}

// TestTopSubprocesses: top --subprocesses -- CMD shows the threads of a
// child the command starts after the attach.
func TestTopSubprocesses(t *testing.T) {
	t.Parallel()
	needRoot(t)
	needTmux(t)
	bin := threadnames(t)
	term := startTmux(t, "topsub", 100, 24,
		fmt.Sprintf(`%s top --idle --subprocesses -- /bin/sh -c 'sleep 0.3; "$0" 4' %s; echo top-exited-$?; sleep 30`, stacktopBin, bin))
	term.keys("3")
	s := term.poll(15*time.Second, func(s string) bool { return strings.Contains(s, " waker ") })
	if !strings.Contains(s, " hot ") || !strings.Contains(s, " waker ") {
		t.Errorf("the child's threads are not shown:\n%s", s)
	}
	term.keys("q")
	if s := term.poll(15*time.Second, func(s string) bool { return strings.Contains(s, "top-exited-") }); !strings.Contains(s, "top-exited-0") {
		t.Errorf("top did not exit with 0:\n%s", s)
	}
}
