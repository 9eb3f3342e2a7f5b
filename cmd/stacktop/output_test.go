package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestRecordOutputKinds runs the real binary on a real target with -o on a
// FIFO (a cat reads it), a symlink and /dev/null, and checks that a
// SIGKILL and a double SIGTERM leave no temporary file.
func TestRecordOutputKinds(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	pid := strconv.Itoa(tg.PID())
	dir := t.TempDir()

	fifo := filepath.Join(dir, "pipe")
	unix.Mkfifo(fifo, 0o600)
	cat := exec.Command("cat", fifo)
	var got bytes.Buffer
	cat.Stdout = &got
	cat.Start()
	if code, stderr := record(t, "-p", pid, "--duration", "300ms", "--format", "folded", "-o", fifo); code != 0 {
		t.Fatalf("-o FIFO: exit %d\n%s", code, stderr)
	}
	cat.Wait()
	if !strings.Contains(got.String(), "hot") {
		t.Errorf("the FIFO's reader got %q", got.String())
	}

	real := filepath.Join(dir, "real.folded")
	os.Symlink("real.folded", filepath.Join(dir, "link.folded"))
	if code, stderr := record(t, "-p", pid, "--duration", "300ms", "-o", filepath.Join(dir, "link.folded")); code != 0 {
		t.Fatalf("-o symlink: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(real); !strings.Contains(string(b), "hot") {
		t.Errorf("the symlink's file holds %q", b)
	}
	if code, stderr := record(t, "-p", pid, "--duration", "300ms", "-o", os.DevNull); code != 0 {
		t.Fatalf("-o /dev/null: exit %d\n%s", code, stderr)
	}
	if fi, _ := os.Lstat(os.DevNull); fi.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is now %v", fi.Mode())
	}
	onlyEntries(t, dir, "link.folded", "pipe", "real.folded")

	for _, sigs := range [][]syscall.Signal{{syscall.SIGKILL}, {syscall.SIGTERM, syscall.SIGTERM}} {
		cmd := exec.Command(stacktopBin, "record", "-p", pid, "-q", "-o", filepath.Join(dir, "killed.pb.gz"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		for _, s := range sigs {
			cmd.Process.Signal(s)
		}
		cmd.Wait()
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp") {
				t.Errorf("after %v: %s left behind", sigs, e.Name())
			}
		}
		if st := tracerPid(t, tg.PID()); st != 0 {
			t.Errorf("after %v: target traced by %d", sigs, st)
		}
	}
}

func tracerPid(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// onlyEntries fails unless dir holds exactly the names given (no temporary
// file left).
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}
