package spawn

import (
	"errors"
	"os"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// TestMain lets the test binary be its own helper, as stacktop is.
func TestMain(m *testing.M) {
	RunHelper(nil)
	os.Exit(m.Run())
}

func devNull(t *testing.T) [3]*os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return [3]*os.File{f, f, f}
}

// TestStartReleaseWait: the command waits for Release before it execs
// (its PID is the shell that will exec it), and Wait reports its status
// as a shell does.
func TestStartReleaseWait(t *testing.T) {
	c, err := Start([]string{"sh", "-c", "exit 7"}, devNull(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abandon()
	if c.PID() <= 0 {
		t.Fatalf("PID %d", c.PID())
	}
	// Not released: still the helper's shell, blocked in read.
	if args := procmaps.Args(c.PID()); len(args) < 2 || args[0] != "/bin/sh" {
		t.Errorf("before Release the process runs %q, want the waiting /bin/sh", args)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	status, err := c.Wait()
	if err != nil || status != 7 {
		t.Errorf("Wait = %d, %v; want 7", status, err)
	}
	killed, err := Start([]string{"sh", "-c", "kill -TERM $$"}, devNull(t))
	if err != nil {
		t.Fatal(err)
	}
	killed.Release()
	if status, err := killed.Wait(); err != nil || status != 128+15 {
		t.Errorf("killed by SIGTERM: Wait = %d, %v; want 143", status, err)
	}
}

// TestEnd: End ends a running command with SIGTERM, or with SIGKILL
// EndGrace later if it ignores SIGTERM, and is harmless once the command
// exited.
func TestEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		script string // touches $1 once it is ready for the signal
		status int
	}{
		{"sleeps", `touch "$1"; exec sleep 30`, 128 + 15},
		{"ignores SIGTERM", `trap "" TERM; touch "$1"; while :; do sleep 0.05; done`, 128 + 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready := t.TempDir() + "/ready"
			cmd, err := Start([]string{"sh", "-c", c.script, "sh", ready}, devNull(t))
			if err != nil {
				t.Fatal(err)
			}
			defer cmd.Abandon()
			cmd.Release()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command did not start")
				}
			}
			start := time.Now()
			if err := cmd.End(); err != nil {
				t.Fatal(err)
			}
			status, err := cmd.Wait()
			took := time.Since(start)
			if err != nil || status != c.status {
				t.Errorf("after End: Wait = %d, %v; want %d", status, err, c.status)
			}
			if !cmd.Ended() {
				t.Error("Ended is false for a command End ended")
			}
			// Not a timing assertion: a command that outlived End by
			// seconds was not ended by it.
			if took > 10*EndGrace {
				t.Errorf("the command lived %v after End", took)
			}
		})
	}
	done, err := Start([]string{"true"}, devNull(t))
	if err != nil {
		t.Fatal(err)
	}
	done.Release()
	if status, err := done.Wait(); err != nil || status != 0 {
		t.Fatalf("true: %d, %v", status, err)
	}
	if err := done.End(); err != nil {
		t.Errorf("End after the command and its helper exited: %v", err)
	}
	if done.Ended() {
		t.Error("Ended is true for a command that exited on its own")
	}
	// EndWhen says a command that exited before its deadline was not
	// ended, however late its status is collected.
	quick, err := Start([]string{"true"}, devNull(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := quick.EndWhen(50*time.Millisecond, nil)
	quick.Release()
	time.Sleep(200 * time.Millisecond) // past the deadline before Wait
	if status, err := quick.Wait(); err != nil || status != 0 {
		t.Fatalf("true: %d, %v", status, err)
	}
	if why := stop(); why != "" {
		t.Errorf("EndWhen says %q for a command that exited before the deadline", why)
	}
}

// TestAbandon: a command abandoned before Release never runs.
func TestAbandon(t *testing.T) {
	mark := t.TempDir() + "/ran"
	c, err := Start([]string{"touch", mark}, devNull(t))
	if err != nil {
		t.Fatal(err)
	}
	c.Abandon()
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the abandoned command ran (stat %s: %v)", mark, err)
	}
}

// TestStartErrors: a command that cannot run is a *StartError with the
// shell's code, found before anything starts.
func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := dir + "/plain"
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		code int
	}{
		{dir + "/missing", ExitNotFound},
		{"stacktop-no-such-command-in-path", ExitNotFound},
		{notExec, ExitNotExecutable},
	} {
		_, err := Start([]string{tt.name}, devNull(t))
		var se *StartError
		if !errors.As(err, &se) || se.Code != tt.code || FailureCode(err, 99) != tt.code {
			t.Errorf("Start(%s): %v, want a *StartError with code %d", tt.name, err, tt.code)
		}
	}
	if FailureCode(errors.New("attach refused"), 99) != 99 {
		t.Error("FailureCode of another error is not the fallback")
	}
}
