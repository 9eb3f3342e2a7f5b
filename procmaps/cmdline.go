package procmaps

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Cmdline returns the process's command line, arguments separated by
// spaces, or its comm in brackets when the command line is empty (kernel
// threads, zombies), as ps prints them. It is for display only: "" if the
// process is gone.
func Cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return ""
		}
		return "[" + strings.TrimSpace(string(comm)) + "]"
	}
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}
