package targets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// WaitSyscall waits until a thread of process pid named comm is blocked in
// system call number nr (the first field of /proc/PID/task/TID/syscall),
// polling every 20 ms for at most timeout. It takes no testing.TB, so the
// emulated machines' init (emu/capture), which has no test to fail, uses it
// too.
func WaitSyscall(pid int, comm string, nr int, timeout time.Duration) error {
	want := strconv.Itoa(nr)
	deadline := time.Now().Add(timeout)
	for {
		names, err := ThreadNames(pid)
		if err != nil {
			return err
		}
		for tid, name := range names {
			if name != comm {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid), "syscall"))
			if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("thread %d of %d: %w", tid, pid, err)
			}
			if f := strings.Fields(string(b)); len(f) > 0 && f[0] == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("thread %s of %d not in system call %d after %v", comm, pid, nr, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
