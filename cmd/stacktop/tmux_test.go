package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// needTmux skips tests that run top in a real terminal where tmux is
// missing.
func needTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (scripts/install-test-deps.sh installs it)")
	}
}

// tmuxTerm is a real terminal for the top tests: a tmux server of the
// test's own, running one command in a detached session.
type tmuxTerm struct {
	t       *testing.T
	session string
}

// startTmux runs command (a shell command line) in a width x height
// terminal; the server is killed when the test ends.
func startTmux(t *testing.T, name string, width, height int, command string) *tmuxTerm {
	t.Helper()
	needTmux(t)
	m := &tmuxTerm{t: t, session: fmt.Sprintf("stacktop-%s-%d", name, os.Getpid())}
	m.run("new-session", "-d", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), "-s", m.session, command)
	t.Cleanup(func() { exec.Command("tmux", "-L", m.session, "kill-server").Run() })
	return m
}

func (m *tmuxTerm) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", m.session}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys types k (a tmux key name: "q", "Enter").
func (m *tmuxTerm) keys(k string) { m.t.Helper(); m.run("send-keys", "-t", m.session, k) }

// screen is what the terminal shows now.
func (m *tmuxTerm) screen() string { m.t.Helper(); return m.run("capture-pane", "-p", "-t", m.session) }

// poll returns the screen as soon as ok accepts it, or the last one after
// d.
func (m *tmuxTerm) poll(d time.Duration, ok func(string) bool) string {
	m.t.Helper()
	var s string
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if s = m.screen(); ok(s) || time.Now().After(deadline) {
			return s
		}
	}
}

// waitFor is poll that fails the test, with the screen, if ok never
// accepted it within d.
func (m *tmuxTerm) waitFor(what string, d time.Duration, ok func(string) bool) string {
	m.t.Helper()
	s := m.poll(d, ok)
	if !ok(s) {
		m.t.Fatalf("screen never showed %s:\n%s", what, s)
	}
	return s
}
