package procmaps

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTaskDirStat: a thread's stat read through the open task directory is
// ReadStat's, and a thread that does not exist is ENOENT.
func TestTaskDirStat(t *testing.T) {
	pid := os.Getpid()
	d, err := OpenTaskDir(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tids, err := Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		got, err := d.Stat(tid)
		if err != nil {
			t.Fatalf("thread %d: %v", tid, err)
		}
		want, err := ReadStat(pid, tid)
		if err != nil {
			t.Fatal(err)
		}
		if got.PID != tid || got.Comm != want.Comm || got.PPID != want.PPID || got.StartTime != want.StartTime {
			t.Errorf("thread %d: TaskDir.Stat %+v, ReadStat %+v", tid, got, want)
		}
	}
	if _, err := d.Stat(1 << 30); !errors.Is(err, unix.ENOENT) {
		t.Errorf("a thread that does not exist: %v, want ENOENT", err)
	}
	if _, err := OpenTaskDir(1 << 30); !errors.Is(err, unix.ENOENT) {
		t.Errorf("a process that does not exist: %v, want ENOENT", err)
	}
}
