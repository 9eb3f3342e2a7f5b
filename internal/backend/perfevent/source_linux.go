package perfevent

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/regs"
)

// Defaults of Options. DefaultWindow is 8 KiB, perf's own default, not
// the ptrace back end's 16 KiB: the kernel copies the whole window in the
// sampled thread's timer interrupt whenever the stack above SP is resident,
// and each KiB over 8 cost the thread 0.1-0.3 µs a sample on this
// project's VM (16 KiB: 0.4-3.6 µs more than 8, up to 0.36% of its time at
// 999 Hz), while no walk of the test targets needed between 8 and 16 KiB
// (see the package doc).
const (
	DefaultRate     = 99
	DefaultWindow   = 8192
	DefaultInterval = 100 * time.Millisecond
)

// Options configure a Source. The zero value samples at DefaultRate with a
// DefaultWindow stack window.
type Options struct {
	// Rate is samples per second of CPU time per thread (the cpu-clock
	// event's period is 1/Rate seconds of the thread's CPU time).
	Rate float64
	// Window is the stack bytes the kernel copies per sample, a multiple
	// of 8 up to MaxWindow.
	Window int
	// RingBytes is the data size of each CPU's ring buffer, a power of
	// two of at least a page; 0 sizes it for two Intervals of samples (at
	// 999 Hz and an 8 KiB window, 2 MiB), capped without CAP_PERFMON to
	// what perf_event_mlock_kb lets a user pin (512 KiB by default).
	RingBytes int
	// Interval is the longest time Next waits before it returns what the
	// kernel wrote; it returns earlier when a ring is half full.
	Interval time.Duration
	// Idle asks for wall-clock (on- and off-CPU) samples, which the kernel's
	// cpu-clock cannot give: Open returns ErrIdle.
	Idle bool
}

// MaxWindow is the largest stack window a sample of arch can carry: a
// record's size is a 16-bit field, and the header, fields and registers
// take their share of it.
func MaxWindow(arch regs.Arch) int {
	l, ok := Layout(arch)
	if !ok {
		return 0
	}
	fixed := headerSize + 8*4 /* tid, time, cpu, period */ + 8 + 8*l.NumRegs() + 16 /* size, dyn_size */
	return (math.MaxUint16 - fixed) &^ 7
}

// A Source samples one process through perf_event: it implements
// backend.Source.
type Source struct {
	pid    int
	opt    Options
	layout *RegsLayout
	format Format
	attr   unix.PerfEventAttr
	cpus   []int
	rings  []*cpuRing // one per CPU, index as cpus

	opened  map[int][]int // TID -> its events' fds (not ring owners)
	ringOf  map[int]int   // fd in opened -> index of the ring it writes to
	covered map[int]bool  // TIDs with events: opened or inherited (FORK seen)
	// failed holds threads whose events could not be opened (EMFILE...):
	// when to try again. Counted once in Round.Failed, not every round.
	failed map[int]time.Time
	pidfd  int
	wall   time.Time // wall clock at mono
	mono   int64     // CLOCK_MONOTONIC ns at wall

	pending   []pending
	carry     []pending // records after an exec, for the next round (bytes copied)
	sample    backend.Sample
	mapsMoved bool
	lastRound time.Time
	pollFds   []unix.PollFd
	closed    bool
	stats     Stats
}

// Stats are counters of a Source beyond those of backend.Round.
type Stats struct {
	Throttled  int64 // PERF_RECORD_THROTTLE records: the kernel lowered the rate (perf_event_max_sample_rate)
	OtherProcs int64 // samples of child processes (which inherit the events only on kernels without inherit_thread), dropped
	Events     int   // perf events open now (threads opened x CPUs)
	Rings      int   // ring buffers (one per CPU)
	RingBytes  int   // data bytes of each ring
	Execs      int64 // execve calls of the process seen (COMM records with the exec flag)
	// KernelExcluded: the kernel allowed only samples in user mode
	// (perf_event_paranoid >= 2 without CAP_PERFMON), so time the threads
	// spent in system calls is not in the profile.
	KernelExcluded bool
}

// Stats returns the Source's counters. Like Next, it is not safe to call
// concurrently with Next.
func (s *Source) Stats() Stats {
	st := s.stats
	st.RingBytes = s.opt.RingBytes
	for _, r := range s.rings {
		if r != nil {
			st.Rings++
			if !r.retired {
				st.Events++
			}
		}
	}
	for _, fds := range s.opened {
		st.Events += len(fds)
	}
	return st
}

type cpuRing struct {
	cpu  int
	fd   int // the event the ring is mapped from
	mem  []byte
	ring *Ring
	// pollFd is the event Next polls for the ring's watermark: the owner,
	// or once the owner's thread is gone (hup), another event writing
	// into the ring (any of them is woken), chosen at the end of a round.
	pollFd int
	hup    bool // pollFd's thread exited: poll reports POLLHUP for ever
	// retired: the owning event was disabled at an exec (dropOldImage);
	// it stays open only as the ring's mapping and output target.
	retired bool
}

type pending struct {
	rec  Record
	ring int
}

// Open opens a sampling event on every thread of pid for each online CPU,
// sharing one ring buffer per CPU, and starts sampling at once. Threads
// the process creates later inherit the events; Close releases everything.
func Open(pid int, opt Options) (*Source, error) {
	if opt.Idle {
		return nil, ErrIdle
	}
	if opt.Rate == 0 {
		opt.Rate = DefaultRate
	}
	if opt.Window == 0 {
		opt.Window = DefaultWindow
	}
	if opt.Interval == 0 {
		opt.Interval = DefaultInterval
	}
	arch := regs.Host()
	layout, ok := Layout(arch)
	if !ok {
		return nil, fmt.Errorf("perfevent: no register layout for %s", runtime.GOARCH)
	}
	switch {
	case math.IsNaN(opt.Rate) || opt.Rate <= 0 || opt.Rate > 100000:
		return nil, fmt.Errorf("perfevent: rate %v outside (0, 100000] Hz", opt.Rate)
	case opt.Window < 8 || opt.Window%8 != 0 || opt.Window > MaxWindow(arch):
		return nil, fmt.Errorf("perfevent: stack window %d: want a multiple of 8 in [8, %d]", opt.Window, MaxWindow(arch))
	case opt.Interval < time.Millisecond:
		return nil, fmt.Errorf("perfevent: interval %v shorter than 1ms", opt.Interval)
	}
	page := os.Getpagesize()
	if opt.RingBytes == 0 {
		need := opt.Rate * float64(opt.Window+512) * 2 * opt.Interval.Seconds()
		// Without CAP_PERFMON (or CAP_IPC_LOCK) the kernel lets a user
		// pin perf_event_mlock_kb per CPU (516 KiB: a 512 KiB ring and
		// its header page) beyond RLIMIT_MEMLOCK: stay within it and
		// let the half-ring watermark wake Next more often instead.
		limit := 64 << 20
		if sys, err := procmaps.ReadPerfEventSysctls(); err == nil && !hasPerfmon() {
			limit = max(sys.MlockKB*1024-page, page)
		}
		opt.RingBytes = page
		for float64(opt.RingBytes) < need && opt.RingBytes*2 <= limit {
			opt.RingBytes *= 2
		}
	}
	if opt.RingBytes < page || opt.RingBytes&(opt.RingBytes-1) != 0 {
		return nil, fmt.Errorf("perfevent: ring of %d bytes: want a power of two of at least %d", opt.RingBytes, page)
	}
	if opt.RingBytes < 2*(opt.Window+512) {
		return nil, fmt.Errorf("perfevent: ring of %d bytes holds fewer than two samples of a %d-byte window", opt.RingBytes, opt.Window)
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	s := &Source{
		pid: pid, opt: opt, layout: layout, cpus: cpus,
		rings:   make([]*cpuRing, len(cpus)),
		opened:  map[int][]int{},
		ringOf:  map[int]int{},
		covered: map[int]bool{},
		failed:  map[int]time.Time{},
		pidfd:   -1,
	}
	s.format = Format{
		SampleType:  SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleRegsUser | SampleStackUser,
		RegsMask:    layout.Mask,
		SampleIDAll: true,
	}
	period := uint64(math.Round(1e9 / opt.Rate))
	s.attr = unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample:      period,
		Sample_type: s.format.SampleType,
		// mmap as well as mmap2: the kernel emits mapping records only
		// while some event has mmap or mmap_data (nr_mmap_events), and
		// with mmap2 set they come as PERF_RECORD_MMAP2.
		Bits: unix.PerfBitInherit | inheritThread | unix.PerfBitExcludeHv |
			unix.PerfBitMmap | unix.PerfBitMmap2 | unix.PerfBitComm | unix.PerfBitCommExec | unix.PerfBitTask |
			unix.PerfBitSampleIDAll | unix.PerfBitWatermark | unix.PerfBitUseClockID,
		Wakeup:            uint32(opt.RingBytes / 2),
		Sample_regs_user:  layout.Mask,
		Sample_stack_user: uint32(opt.Window),
		Clockid:           unix.CLOCK_MONOTONIC,
	}
	s.pidfd, err = unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("perfevent: process %d: %w", pid, err)
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	s.wall, s.mono = time.Now(), ts.Nano()

	tids, err := procmaps.Threads(pid)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("perfevent: process %d: %w", pid, err)
	}
	s.chooseKernelTime(tids)
	for _, tid := range tids {
		if err := s.openThread(tid); err != nil {
			s.Close()
			return nil, err
		}
	}
	if len(s.covered) == 0 {
		s.Close()
		return nil, fmt.Errorf("perfevent: process %d: %w", pid, backend.ErrExited)
	}
	s.lastRound = time.Now()
	return s, nil
}

// Close disables and closes every event and unmaps the rings. It is safe
// to call more than once.
func (s *Source) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	for _, fds := range s.opened {
		for _, fd := range fds {
			unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
			unix.Close(fd)
		}
	}
	s.opened = nil
	for _, r := range s.rings {
		if r == nil {
			continue
		}
		unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
		unix.Munmap(r.mem)
		unix.Close(r.fd)
	}
	s.rings = nil
	if s.pidfd >= 0 {
		unix.Close(s.pidfd)
		s.pidfd = -1
	}
	return nil
}
