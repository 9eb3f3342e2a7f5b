package procmaps

import (
	"strconv"
	"strings"
)

// ReadComm returns a thread's name (/proc/PID/task/TID/comm), read into
// buf (its size bounds the read: comm holds at most 16 bytes). Threads name
// themselves after they start, so a sampler reads it again now and then.
func ReadComm(pid, tid int, buf []byte) (string, error) {
	b, err := readProcFile("/proc/"+strconv.Itoa(pid)+"/task/"+strconv.Itoa(tid)+"/comm", buf)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
