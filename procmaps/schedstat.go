package procmaps

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// taskFile is a file of /proc/PID/task/TID kept open: one pread at offset
// 0 makes the seq_file show it afresh, a fraction of the cost of open, read
// and close with thousands of threads at 99 Hz.
type taskFile struct {
	fd int
}

func openTaskFile(pid, tid int, name string) (taskFile, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/" + name
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return taskFile{}, fmt.Errorf("open %s: %w", path, err)
	}
	return taskFile{fd: fd}, nil
}

// read rereads the file into buf. An error (ESRCH) means the thread
// exited.
//
// It is a raw system call: the read cannot block (the kernel formats a
// line of counters), so the Go scheduler's syscall bookkeeping would be
// pure cost at thousands of reads a second.
func (f taskFile) read(buf []byte) ([]byte, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(f.fd),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if e != 0 {
		return nil, e
	}
	if n == 0 {
		return nil, errors.New("empty")
	}
	return buf[:n], nil
}

func (f taskFile) close() error { return unix.Close(f.fd) }

// SchedstatFile is /proc/PID/task/TID/schedstat kept open.
type SchedstatFile struct {
	f   taskFile
	buf [64]byte
}

// OpenSchedstat opens tid's schedstat. It fails on kernels without
// CONFIG_SCHEDSTATS-style task statistics (the file is then absent).
func OpenSchedstat(pid, tid int) (*SchedstatFile, error) {
	f, err := openTaskFile(pid, tid, "schedstat")
	if err != nil {
		return nil, err
	}
	return &SchedstatFile{f: f}, nil
}

// Read returns the thread's current schedstat. An error (ESRCH) means the
// thread exited.
func (f *SchedstatFile) Read() (Schedstat, error) {
	b, err := f.f.read(f.buf[:])
	if err != nil {
		return Schedstat{}, fmt.Errorf("schedstat: %w", err)
	}
	return ParseSchedstat(b)
}

// Close closes the file.
func (f *SchedstatFile) Close() error { return f.f.close() }

// StatFile is /proc/PID/task/TID/stat kept open, for the thread's state.
type StatFile struct {
	f   taskFile
	buf [1024]byte
}

// OpenStat opens tid's stat.
func OpenStat(pid, tid int) (*StatFile, error) {
	f, err := openTaskFile(pid, tid, "stat")
	if err != nil {
		return nil, err
	}
	return &StatFile{f: f}, nil
}

// Read reads the thread's stat line now: its state (R: running or
// runnable) and its user and system CPU time among the rest. Its schedstat
// counters move only when it leaves a CPU or at a scheduler tick, so a
// thread that kept its CPU since the last reading can show no change; the
// state tells.
func (f *StatFile) Read() (Stat, error) {
	b, err := f.f.read(f.buf[:])
	if err != nil {
		return Stat{}, fmt.Errorf("stat: %w", err)
	}
	return ParseStat(b)
}

// Running reports whether the thread is running or runnable now (state R).
func (f *StatFile) Running() (bool, error) {
	st, err := f.Read()
	return err == nil && st.State == 'R', err
}

// Close closes the file.
func (f *StatFile) Close() error { return f.f.close() }

// ProcessClock reads the run time of a whole process, in nanoseconds: what
// its live threads' schedstat files show as their first field, summed,
// plus what its exited threads ran. It is the process's CPU clock
// (clock_gettime of CPUCLOCK_SCHED), so one call stands for reading every
// thread. The counters of a thread move only when the scheduler accounts
// for it (it leaves a CPU, or at a scheduler tick), the same moments for
// this sum and for schedstat; so two equal readings prove that no thread's
// schedstat changed between them.
//
// Unarmed, the kernel sums the clock by walking every thread: 10 µs for a
// thousand threads in a tight loop, but 120 µs at 99 Hz, where each walk
// finds the threads out of the CPU caches. Once any CPU timer is armed on
// the process, the kernel keeps a running total instead (as it does for
// setitimer(ITIMER_PROF) or RLIMIT_CPU), and a reading costs under a
// microsecond whatever the thread count. So OpenProcessClock arms one that
// never fires. What the process pays: an atomic add to a shared counter
// each time one of its threads is accounted, until the timer is deleted
// (Close; the kernel deletes it too if stacktop dies) and the process's
// next scheduler tick notices.
type ProcessClock struct {
	clock int32
	timer int32 // the kernel's timer ID; -1 if none could be armed
}

// OpenProcessClock opens the CPU clock of process pid.
func OpenProcessClock(pid int) (*ProcessClock, error) {
	// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) from the kernel's
	// posix-timers.h: the PID complemented, shifted past the clock type.
	c := &ProcessClock{clock: int32(^uint32(pid)<<3) | cpuClockSched, timer: -1}
	if _, err := c.RunNS(); err != nil {
		return nil, fmt.Errorf("procmaps: CPU clock of process %d: %w", pid, err)
	}
	// SIGEV_SIGNAL, not SIGEV_NONE: the kernel starts its running total
	// only for timers that notify. The signal is SIGURG, which Go's
	// runtime takes in stride, and it would come only after the process
	// used 2^31 seconds of CPU.
	ev := sigevent{signo: int32(unix.SIGURG), notify: sigevSignal}
	var id int32
	if _, _, e := unix.RawSyscall(unix.SYS_TIMER_CREATE, uintptr(c.clock),
		uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&id))); e != 0 {
		return c, nil // unarmed: slower, still right
	}
	spec := itimerspec{value: unix.Timespec{Sec: 1 << 31}}
	if _, _, e := unix.RawSyscall6(unix.SYS_TIMER_SETTIME, uintptr(id), 0,
		uintptr(unsafe.Pointer(&spec)), 0, 0, 0); e != 0 {
		unix.RawSyscall(unix.SYS_TIMER_DELETE, uintptr(id), 0, 0)
		return c, nil
	}
	c.timer = id
	return c, nil
}

// Armed reports whether readings are O(1) (a timer is armed).
func (c *ProcessClock) Armed() bool { return c.timer >= 0 }

// RunNS reads the clock. An error means the process is gone.
func (c *ProcessClock) RunNS() (uint64, error) {
	var ts unix.Timespec
	if _, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, uintptr(c.clock), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, e
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec), nil
}

// Close deletes the timer. It is idempotent.
func (c *ProcessClock) Close() error {
	if c.timer < 0 {
		return nil
	}
	_, _, e := unix.RawSyscall(unix.SYS_TIMER_DELETE, uintptr(c.timer), 0, 0)
	c.timer = -1
	if e != 0 {
		return e
	}
	return nil
}

const (
	cpuClockSched = 2 // CPUCLOCK_SCHED: run time as the scheduler counts it
	sigevSignal   = 0 // SIGEV_SIGNAL
)

// sigevent is the kernel's struct sigevent: 64 bytes on every 64-bit
// architecture.
type sigevent struct {
	value  uint64
	signo  int32
	notify int32
	_      [12]int32
}

type itimerspec struct {
	interval, value unix.Timespec
}
