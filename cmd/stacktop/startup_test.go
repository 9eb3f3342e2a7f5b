package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestStartErrors: a command that cannot start makes record and top exit
// with the shell's code and the exec error on one line, before anything
// is started; record leaves no file, not even a temporary one.
func TestStartErrors(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv0  string
		code   int
		phrase string
	}{
		{filepath.Join(dir, "no-such-program"), 127, "no such file or directory"},
		{"stacktop-no-such-command", 127, "not found in PATH"},
		{notExec, 126, "permission denied"},
		{dir, 126, "is a directory"},
	} {
		out := filepath.Join(dir, "out", "p.folded")
		os.MkdirAll(filepath.Dir(out), 0o755)
		for _, verb := range []string{"record", "top"} {
			args := []string{verb, "--", c.argv0, "arg"}
			if verb == "record" {
				args = []string{verb, "-o", out, "--", c.argv0, "arg"}
			}
			r := stacktop(t, args...)
			msg := strings.TrimSpace(r.stderr)
			if r.code != c.code || strings.Count(msg, "\n") > 0 || !strings.Contains(msg, "cannot run "+c.argv0) || !strings.Contains(msg, c.phrase) {
				t.Errorf("%s -- %s: exit %d, stderr %q; want exit %d and one line with %q", verb, c.argv0, r.code, msg, c.code, c.phrase)
			}
		}
		if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
			t.Errorf("record -- %s left %d files behind (%s...)", c.argv0, len(ents), ents[0].Name())
		}
	}

	// Executable, but exec fails: the interpreter is missing. Only the
	// exec itself can tell; still no file, and the shell's status.
	script := filepath.Join(dir, "bad-interpreter")
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out", "s.folded")
	code, stderr := record(t, "-o", out, "--", script)
	if code != 127 || !strings.Contains(stderr, "cannot run "+script) || !strings.Contains(stderr, "no profile written") {
		t.Errorf("record -- %s: exit %d, stderr %q; want 127 and cannot run", script, code, stderr)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Errorf("record -- %s left %s behind", script, ents[0].Name())
	}
	// A command that execs and then exits 127 itself is a recording.
	code, _ = record(t, "-q", "-o", out, "--", "/bin/sh", "-c", "exit 127")
	if _, err := os.Stat(out); code != 127 || err != nil {
		t.Errorf("sh -c 'exit 127': exit %d, file %v; want 127 and the profile written", code, err)
	}
}

// TestRecordTIDNotOfTarget: --tid naming a thread of another process is
// an error (exit 2, one line), not an empty profile.
func TestRecordTIDNotOfTarget(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	other := os.Getpid()
	out := filepath.Join(t.TempDir(), "tid.folded")
	for _, verb := range []string{"record", "top"} {
		args := []string{verb, "-p", strconv.Itoa(tg.PID()), "--tid", strconv.Itoa(other)}
		if verb == "record" {
			args = append(args, "--duration", "1s", "-o", out)
		}
		r := stacktop(t, args...)
		checkAttachFailure(t, r, "--tid "+strconv.Itoa(other)+" is not a thread of process "+strconv.Itoa(tg.PID()))
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("record with a foreign --tid wrote %s", out)
	}
	// The target's own thread is accepted.
	code, stderr := record(t, "-p", strconv.Itoa(tg.PID()), "--tid", strconv.Itoa(tg.PID()), "--duration", "300ms", "-q", "-o", out)
	if code != 0 {
		t.Errorf("--tid of the target's main thread: exit %d\n%s", code, stderr)
	}
	checkUntraced(t, tg.PID())
}

// TestEarlyInitRunsFirst: package early's init, which raises a dump's
// priority, runs before the initialisers that take most of the start-up
// (regexps, gRPC, HTTP), as the binary's own init trace shows.
func TestEarlyInitRunsFirst(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(stacktopBin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	order := map[string]int{}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			order[f[1]] = n
			n++
		}
	}
	early, ok := order["codeberg.org/stacktop/stacktop/internal/selfsched/early"]
	if !ok {
		t.Fatalf("no init of package early in the trace:\n%s", out)
	}
	for _, later := range []string{"regexp", "github.com/google/pprof/profile", "google.golang.org/grpc", "net/http", "codeberg.org/stacktop/stacktop/internal/earlytty"} {
		if i, ok := order[later]; ok && i < early {
			t.Errorf("%s initialised before package early (%d < %d)", later, i, early)
		}
	}
	// earlytty's init must run before Bubble Tea's, which asks the terminal
	// its background colour unless told: by import-path order (its doc).
	tty, ok1 := order["codeberg.org/stacktop/stacktop/internal/earlytty"]
	tea, ok2 := order["github.com/charmbracelet/bubbletea"]
	if !ok1 || !ok2 || tty > tea {
		t.Errorf("earlytty initialised at %d (%v), Bubble Tea at %d (%v): earlytty must come first", tty, ok1, tea, ok2)
	}
	if early > n/4 {
		t.Errorf("package early initialised %d of %d: not among the first", early, n)
	}
}

// TestSettleRestoresNice: a command other than dump runs at the nice value
// it was started with, though package early raised it during the
// initialisers: a program record starts inherits it.
func TestSettleRestoresNice(t *testing.T) {
	t.Parallel()
	needRoot(t)
	out := filepath.Join(t.TempDir(), "p.folded")
	cmd := exec.Command(stacktopBin, "record", "-o", out, "--", "nice")
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("record -- nice: %v", err)
	}
	self, err := exec.Command("nice").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != strings.TrimSpace(string(self)) {
		t.Errorf("the recorded program ran at nice %s, want %s (stacktop's own start)", strings.TrimSpace(string(got)), strings.TrimSpace(string(self)))
	}
}
