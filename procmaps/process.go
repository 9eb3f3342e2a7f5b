package procmaps

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Executable returns the path of the process's executable as the kernel
// reports it (/proc/PID/exe), without the " (deleted)" suffix of a
// replaced file; "" if the process is gone or the link is unreadable.
func Executable(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(p, " (deleted)")
}

// Args returns the process's argv as /proc/PID/cmdline holds it; nil if
// the process is gone or has none (a kernel thread, a zombie).
func Args(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}
