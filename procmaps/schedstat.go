package procmaps

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SchedstatFile is /proc/PID/task/TID/schedstat kept open: one pread at
// offset 0 makes the seq_file show it afresh, a fraction of the cost of
// open, read and close with thousands of threads at 99 Hz.
type SchedstatFile struct {
	fd  int
	buf [64]byte
}

// OpenSchedstat opens tid's schedstat. It fails on kernels without
// CONFIG_SCHEDSTATS-style task statistics (the file is then absent).
func OpenSchedstat(pid, tid int) (*SchedstatFile, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/schedstat"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &SchedstatFile{fd: fd}, nil
}

// Read returns the thread's current schedstat. An error (ESRCH) means the
// thread exited.
//
// It is a raw system call: the read cannot block (the kernel formats three
// counters), so the Go scheduler's syscall bookkeeping would be pure cost
// at thousands of reads a second.
func (f *SchedstatFile) Read() (Schedstat, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(f.fd),
		uintptr(unsafe.Pointer(&f.buf[0])), uintptr(len(f.buf)), 0, 0, 0)
	if e != 0 {
		return Schedstat{}, e
	}
	if n == 0 {
		return Schedstat{}, errors.New("schedstat: empty")
	}
	return ParseSchedstat(f.buf[:n])
}

// Close closes the file.
func (f *SchedstatFile) Close() error {
	return unix.Close(f.fd)
}

// ThreadRunning reports whether thread tid is running or runnable now
// (state R in /proc/PID/task/TID/stat). Its schedstat counters move only
// when it leaves a CPU or at a scheduler tick, so a thread that kept its
// CPU since the last reading can show no change; the state tells.
func ThreadRunning(pid, tid int) (bool, error) {
	var buf [1024]byte
	b, err := readProcFile(procPath(pid, "task/"+strconv.Itoa(tid)+"/stat"), buf[:])
	if err != nil {
		return false, fmt.Errorf("procmaps: %w", err)
	}
	st, err := ParseStat(b)
	if err != nil {
		return false, err
	}
	return st.State == 'R', nil
}
