package procmaps

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/targetfile"
)

// The one-shot reads below are the /proc facts other packages need beyond
// maps, stat, status and schedstat: a thread's name, a process's children,
// its memory file, the paths that reach into its mount namespace, and the
// system-wide settings an attach error explains. They are here so that no
// other package opens a file under /proc (see the package doc).

// ThreadName reads /proc/PID/task/TID/comm into buf and returns the name
// without its newline, a slice of buf. It costs one open, read and close,
// no allocation: an engine calls it for every sampled thread once a second.
// An error (ENOENT, ESRCH) means the thread exited.
func ThreadName(pid, tid int, buf []byte) ([]byte, error) {
	b, err := readSmall(taskPath(pid, tid, "comm"), buf)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b, []byte{'\n'}), nil
}

// Comm returns the process's name (/proc/PID/comm); "" if it is gone.
func Comm(pid int) string {
	b, err := os.ReadFile(procPath(pid, "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Children returns the PIDs of the children of every thread of the
// process (/proc/PID/task/TID/children; a child belongs to the thread
// that forked it). Threads that exit meanwhile are skipped; an error means
// the process is gone.
func Children(pid int) ([]int, error) {
	dir := procPath(pid, "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("procmaps: %w", err)
	}
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/children")
		if err != nil {
			continue
		}
		out = appendPIDs(out, b)
	}
	return out, nil
}

func appendPIDs(out []int, b []byte) []int {
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// OpenMem opens /proc/PID/mem for reading: the memory of a process that
// the caller traces (or may ptrace-attach), read with pread at addresses.
func OpenMem(pid int) (*os.File, error) {
	return os.Open(procPath(pid, "mem"))
}

// OpenExecutable opens the process's executable through /proc/PID/exe:
// the file it runs even if it was deleted or replaced since, in any mount
// namespace (through targetfile: a regular file, under a deadline).
func OpenExecutable(pid int) (*targetfile.File, error) {
	return targetfile.Opener{}.OpenProcLink(procPath(pid, "exe"))
}

// FileUser is the user the process accesses files as (its filesystem UID
// and GID): the user files opened on its behalf must be readable by.
func FileUser(pid int) (*targetfile.User, error) {
	st, err := ReadStatus(pid, 0)
	if err != nil {
		return nil, err
	}
	if st.UIDs[3] < 0 || st.GIDs[3] < 0 {
		return nil, fmt.Errorf("procmaps: status of %d: no filesystem UID or GID", pid)
	}
	return &targetfile.User{UID: uint32(st.UIDs[3]), GID: uint32(st.GIDs[3])}, nil
}

// IsThreadOf reports whether thread tid belongs to process pid now (its
// /proc/PID/task entry exists): one stat, no read.
func IsThreadOf(pid, tid int) bool {
	return unix.Access(procPath(pid, "task/"+strconv.Itoa(tid)), unix.F_OK) == nil
}

// RootDir is /proc/PID/root: the process's root directory, through which a
// path of its mount namespace (a container's) is opened from ours.
func RootDir(pid int) string { return procPath(pid, "root") }

// FDPath is /proc/self/fd/FD, the name linkat(2) gives an O_TMPFILE file
// without needing CAP_DAC_READ_SEARCH.
func FDPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// ExecutableID returns the device and inode of the file the process runs
// (/proc/PID/exe, followed), to tell its executable's mappings from its
// libraries'.
func ExecutableID(pid int) (dev, ino uint64, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(procPath(pid, "exe"), &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Dev), st.Ino, nil
}

// StatOwner returns the owner of /proc/PID/stat. The kernel makes a
// non-dumpable process's /proc files root's, whatever its own UID.
func StatOwner(pid int) (uid int, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(procPath(pid, "stat"), &st); err != nil {
		return -1, err
	}
	return int(st.Uid), nil
}

// PtraceScope returns the Yama LSM's ptrace_scope (0 classic, 1 children
// only, 2 admin only, 3 no attach); -1 when Yama is absent or unreadable.
func PtraceScope() int {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return v
}

// InitCgroup returns /proc/1/cgroup, the cgroup of PID 1 as this process
// sees it (naming a container runtime when stacktop runs in one); nil when
// unreadable.
func InitCgroup() []byte {
	b, _ := os.ReadFile("/proc/1/cgroup")
	return b
}

func taskPath(pid, tid int, name string) string {
	return "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/" + name
}

// readSmall reads a small /proc file into buf with one read.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
