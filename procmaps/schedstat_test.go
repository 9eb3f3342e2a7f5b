package procmaps

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSchedstatFileRereads checks what SchedstatFile relies on: pread at
// offset 0 of an open schedstat shows the thread's current run time, not
// the contents of the first read.
func TestSchedstatFileRereads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := OpenSchedstat(os.Getpid(), unix.Gettid())
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	first, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		// Burn 20 ms of this thread's CPU time.
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		}
		cur, err := f.Read()
		if err != nil {
			t.Fatal(err)
		}
		if cur.RunNS >= first.RunNS+10_000_000 {
			return
		}
	}
	t.Fatalf("schedstat still shows %d ns after 60 ms of CPU: stale contents", first.RunNS)
}
