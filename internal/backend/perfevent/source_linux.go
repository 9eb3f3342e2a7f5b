package perfevent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
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

// inheritThread is perf_event_attr.inherit_thread (bit 35, Linux 5.13):
// only threads made by clone(CLONE_THREAD) inherit the events, not child
// processes, whose samples would fill the rings only to be dropped.
const inheritThread = unix.CBitFieldMaskBit35

// chooseKernelTime decides whether samples may land while a thread runs
// in the kernel. A thread's CPU time includes its system calls (on this
// kind of VM even clock_gettime is one: the vDSO's clock is off), and
// the ptrace back end's on-CPU weights count it; with exclude_kernel the
// timer's samples in a system call are dropped, and a profile of code that
// calls the kernel often loses that share (40% of testdata split's).
// Samples in the kernel still carry the user registers and stack as they
// were at kernel entry: the user stack that made the call. Without
// CAP_PERFMON and with perf_event_paranoid >= 2 the kernel refuses that;
// the event then excludes kernel time and Stats says so. A kernel without
// inherit_thread refuses the bit with EINVAL: the event then inherits into
// child processes too, as before 5.13 (their samples are dropped).
func (s *Source) chooseKernelTime(tids []int) {
	for i := 0; i < len(tids); i++ {
		fd, err := unix.PerfEventOpen(&s.attr, tids[i], s.cpus[0], -1, unix.PERF_FLAG_FD_CLOEXEC)
		switch err {
		case nil:
			unix.Close(fd)
			return
		case unix.ESRCH:
			continue
		case unix.EINVAL:
			if s.attr.Bits&inheritThread != 0 {
				s.attr.Bits &^= inheritThread
				i-- // the same thread again
				continue
			}
		case unix.EACCES, unix.EPERM:
			s.attr.Bits |= unix.PerfBitExcludeKernel
			s.stats.KernelExcluded = true
		}
		return // other errors are openThread's to report
	}
}

// openThread opens tid's event on every CPU. A thread that is gone is
// skipped; other failures are returned classified.
func (s *Source) openThread(tid int) error {
	var fds []int
	for i, cpu := range s.cpus {
		fd, err := unix.PerfEventOpen(&s.attr, tid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err == unix.ESRCH {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil
		}
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return s.refused(err, false)
		}
		if s.rings[i] == nil {
			r, err := s.mapRing(fd, cpu)
			if err != nil {
				unix.Close(fd)
				for _, fd := range fds {
					unix.Close(fd)
				}
				return err
			}
			s.rings[i] = r
			continue // the ring owner's fd lives with the ring
		}
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, s.rings[i].fd); err != nil {
			unix.Close(fd)
			for _, fd := range fds {
				unix.Close(fd)
			}
			return fmt.Errorf("perfevent: thread %d: PERF_EVENT_IOC_SET_OUTPUT: %w", tid, err)
		}
		fds = append(fds, fd)
		s.ringOf[fd] = i
	}
	s.opened[tid] = fds
	s.covered[tid] = true
	return nil
}

func (s *Source) mapRing(fd, cpu int) (*cpuRing, error) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, page+s.opt.RingBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if err == unix.EPERM || err == unix.ENOMEM {
			return nil, s.refused(err, true)
		}
		return nil, fmt.Errorf("perfevent: mapping the ring of CPU %d: %w", cpu, err)
	}
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	data := mem[page:]
	if meta.Data_offset != 0 && meta.Data_size != 0 {
		if meta.Data_offset+meta.Data_size > uint64(len(mem)) {
			unix.Munmap(mem)
			return nil, fmt.Errorf("perfevent: ring of CPU %d: data at %d+%d outside the %d-byte mapping", cpu, meta.Data_offset, meta.Data_size, len(mem))
		}
		data = mem[meta.Data_offset : meta.Data_offset+meta.Data_size]
	}
	ring, err := NewRing(data, &meta.Data_head, &meta.Data_tail, nil)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return &cpuRing{cpu: cpu, fd: fd, pollFd: fd, mem: mem, ring: ring}, nil
}

// refused classifies a perf_event_open or mmap failure.
func (s *Source) refused(err error, mmap bool) error {
	e := &RefusedError{PID: s.pid, Paranoid: -2, MlockKB: -1, Err: err}
	sys, serr := procmaps.ReadPerfEventSysctls()
	if serr == nil {
		e.Paranoid, e.MlockKB = sys.Paranoid, sys.MlockKB
	}
	privileged := hasPerfmon()
	switch {
	case mmap:
		e.Why = RefusedMlock
	case err == unix.ENOENT || err == unix.EOPNOTSUPP || (err == unix.ENOSYS && errors.Is(serr, os.ErrNotExist)):
		e.Why = RefusedUnsupported
	case err == unix.ENOSYS:
		e.Why = RefusedFiltered
	case (err == unix.EPERM || err == unix.EACCES) && privileged:
		e.Why = RefusedFiltered
	case (err == unix.EPERM || err == unix.EACCES) && e.Paranoid > 2:
		e.Why = RefusedParanoid
	case err == unix.EPERM || err == unix.EACCES:
		e.Why = RefusedPermission
	case err == unix.EMFILE || err == unix.ENFILE:
		return fmt.Errorf("perfevent: process %d: one event per thread and CPU (%d CPUs) needs more open files than allowed: raise ulimit -n or use --backend ptrace: %w", s.pid, len(s.cpus), err)
	default:
		return fmt.Errorf("perfevent: perf_event_open on process %d: %w", s.pid, err)
	}
	return e
}

// hasPerfmon reports whether stacktop holds CAP_PERFMON or CAP_SYS_ADMIN in
// its effective set.
func hasPerfmon() bool {
	const capPerfmon, capSysAdmin = 38, 21
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return os.Geteuid() == 0
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(capPerfmon) || has(capSysAdmin)
}

// Next waits until a ring is half full or Options.Interval has passed since
// the previous round, then yields every sample the kernel wrote, ordered
// by time across CPUs. A round ends at an exec of the process: it returns
// with Round.Exec before any sample of the new program, and the next call
// yields the records after the exec at once, without waiting. When ctx
// ends it still yields what the rings hold, then returns ctx.Err().
func (s *Source) Next(ctx context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	var round backend.Round
	if s.closed {
		return round, errors.New("perfevent: Next after Close")
	}
	var exited bool
	var err error
	if len(s.carry) == 0 {
		exited, err = s.wait(ctx)
		if err != nil && ctx.Err() == nil {
			return round, err
		}
	}
	s.lastRound = time.Now()
	if err != nil {
		// ctx ended (Ctrl-C, --duration): what the kernel wrote since
		// the previous round is still yielded, so the last interval is
		// not lost.
		if s.drain(&round, yield) {
			// Ended at an exec: the rest is the next call's.
			s.dropOldImage()
			return round, nil
		}
		return round, err
	}
	// List the threads before draining: a thread the kernel created with
	// an inherited event has written its FORK record by the time the
	// rings are drained, so it is not opened twice.
	tids, terr := procmaps.Threads(s.pid)
	execed := s.drain(&round, yield)
	if execed {
		s.dropOldImage()
		if terr == nil && !exited {
			// The listing may predate the exec.
			tids, terr = procmaps.Threads(s.pid)
		}
	}
	if terr != nil || exited {
		if execed {
			// The records after the exec come first; the next call,
			// which does not wait, then finds the process gone.
			return round, nil
		}
		return round, backend.ErrExited
	}
	live := make(map[int]bool, len(tids))
	now := time.Now()
	for _, tid := range tids {
		live[tid] = true
		if s.covered[tid] {
			continue
		}
		retry, failedBefore := s.failed[tid]
		if failedBefore && now.Before(retry) {
			continue
		}
		if err := s.openThread(tid); err != nil {
			if !failedBefore {
				round.Failed++
				round.Err = err
			}
			s.failed[tid] = now.Add(openRetry)
			continue
		}
		delete(s.failed, tid)
	}
	for tid := range s.failed {
		if !live[tid] || s.covered[tid] {
			delete(s.failed, tid)
		}
	}
	for tid, fds := range s.opened {
		if !live[tid] {
			s.closeEvents(fds)
			delete(s.opened, tid)
		}
	}
	for tid := range s.covered {
		if !live[tid] {
			delete(s.covered, tid)
		}
	}
	s.choosePollFds()
	round.Threads = len(tids)
	return round, nil
}

// dropOldImage disables and closes the events of the program an exec
// replaced, so the loop after it opens events on every thread of the new
// one. An execve from a thread other than the main one gives that thread
// the PID: its events, opened (or inherited) under its old TID, would be
// closed as those of an exited thread while the PID stayed marked covered,
// leaving the new program without events. Events inherited from the ring
// owners are disabled with them (PERF_EVENT_IOC_DISABLE reaches inherited
// children), else a thread that survived the exec would be sampled twice;
// the owners' fds stay open with the mapped rings, which the new events
// write into.
func (s *Source) dropOldImage() {
	for tid, fds := range s.opened {
		s.closeEvents(fds)
		delete(s.opened, tid)
	}
	clear(s.covered)
	clear(s.failed)
	for _, r := range s.rings {
		if r != nil && !r.retired {
			unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
			r.retired = true
		}
	}
}

// closeEvents disables and closes events of s.opened. A ring polled through
// one of them is polled through its owner again (which may report the hup
// at once; choosePollFds then finds another).
func (s *Source) closeEvents(fds []int) {
	for _, fd := range fds {
		if i, ok := s.ringOf[fd]; ok {
			if r := s.rings[i]; r != nil && r.pollFd == fd {
				r.pollFd, r.hup = r.fd, false
			}
			delete(s.ringOf, fd)
		}
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
		unix.Close(fd)
	}
}

// choosePollFds gives a ring whose polled event's thread has exited (the
// owner's, typically the main thread's: after an execve from another
// thread it always is) another event writing into it, so the half-ring
// watermark wakes Next again instead of the ring overflowing until the
// interval ends.
func (s *Source) choosePollFds() {
	for _, fds := range s.opened {
		for _, fd := range fds {
			if r := s.rings[s.ringOf[fd]]; r != nil && r.hup && fd != r.pollFd {
				r.pollFd, r.hup = fd, false
			}
		}
	}
}

// openRetry is how often a thread whose events could not be opened is tried
// again: the cause (too many open files, mostly) rarely goes away soon.
const openRetry = time.Second

// wait blocks until a ring passes its watermark, the interval ends, the
// process exits (true) or ctx is done.
func (s *Source) wait(ctx context.Context) (bool, error) {
	deadline := s.lastRound.Add(s.opt.Interval)
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		// Poll in slices so a cancelled ctx is seen within 20 ms.
		ms := int(min(left, 20*time.Millisecond) / time.Millisecond)
		s.pollFds = s.pollFds[:0]
		s.pollFds = append(s.pollFds, unix.PollFd{Fd: int32(s.pidfd), Events: unix.POLLIN})
		for _, r := range s.rings {
			if r != nil && !r.hup {
				s.pollFds = append(s.pollFds, unix.PollFd{Fd: int32(r.pollFd), Events: unix.POLLIN})
			}
		}
		n, err := unix.Poll(s.pollFds, max(ms, 1))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("perfevent: poll: %w", err)
		}
		if n == 0 {
			continue
		}
		if s.pollFds[0].Revents != 0 {
			return true, nil
		}
		ready := false
		for _, p := range s.pollFds[1:] {
			if p.Revents&unix.POLLHUP != 0 {
				for _, r := range s.rings {
					if r != nil && r.pollFd == int(p.Fd) {
						r.hup = true
					}
				}
			}
			if p.Revents&unix.POLLIN != 0 {
				ready = true
			}
		}
		if ready {
			return false, nil
		}
	}
}

// errBeforeExec is the Round.Err of samples dropped because an execve
// followed them in the same round: their address space is gone.
var errBeforeExec = errors.New("perfevent: sample taken before the process called execve")

// drain parses every ring up to its head, orders the records by time (with
// those an exec left over) and handles them, then releases the rings. At
// the first exec record of the process it stops and reports true: the
// engine names samples as they are yielded and reloads the address space
// only after a round with Exec, so the records after it are copied out of
// the rings (at most the rings' size, once per exec) for the next round.
func (s *Source) drain(round *backend.Round, yield func(*backend.Sample)) bool {
	s.pending = append(s.pending[:0], s.carry...)
	s.carry = s.carry[:0]
	for i, r := range s.rings {
		if r == nil {
			continue
		}
		r.ring.Begin()
		for {
			b, pos, ok := r.ring.Next()
			if !ok {
				break
			}
			s.pending = append(s.pending, pending{ring: i})
			p := &s.pending[len(s.pending)-1]
			if err := s.format.ParseRecord(b, &p.rec); err != nil {
				var fe *FormatError
				if errors.As(err, &fe) {
					fe.Pos = pos
				}
				round.Failed++
				round.Err = err
				s.pending = s.pending[:len(s.pending)-1]
				continue
			}
			// A record that straddled the ring's end lives in the
			// ring's scratch buffer; only one record per pass can
			// straddle, so it stays valid until Release.
		}
		if err := r.ring.Err(); err != nil {
			round.Failed++
			round.Err = err
		}
	}
	sort.SliceStable(s.pending, func(a, b int) bool { return s.pending[a].rec.Time < s.pending[b].rec.Time })
	end := len(s.pending) // the exec record, else past the last
	for i := range s.pending {
		if rec := &s.pending[i].rec; rec.Type == RecordComm && rec.Exec && int(rec.PID) == s.pid {
			end = i
			break
		}
	}
	for i := range s.pending[:min(end+1, len(s.pending))] {
		rec := &s.pending[i].rec
		switch rec.Type {
		case RecordSample:
			if int(rec.PID) != s.pid {
				s.stats.OtherProcs++
				continue
			}
			if i < end && end < len(s.pending) {
				round.Failed++
				round.Err = errBeforeExec
				continue
			}
			if err := s.fillSample(rec); err != nil {
				round.Failed++
				round.Err = err
				continue
			}
			yield(&s.sample)
		case RecordLost, RecordLostSamples:
			round.Lost += int64(rec.Lost)
		case RecordComm:
			if rec.Exec && int(rec.PID) == s.pid {
				round.Exec = true
				s.stats.Execs++
				s.mapsMoved = true
			}
		case RecordMmap, RecordMmap2:
			if int(rec.PID) == s.pid && rec.Executable() {
				s.mapsMoved = true
			}
		case RecordFork:
			if int(rec.PID) == s.pid {
				s.covered[int(rec.TID)] = true
			}
		case RecordThrottle:
			s.stats.Throttled++
		}
	}
	if end < len(s.pending) {
		s.keep(s.pending[end+1:])
	}
	for _, r := range s.rings {
		if r != nil {
			r.ring.Release()
		}
	}
	return end < len(s.pending)
}

// keep copies records into s.carry, with the bytes they point to, which
// lie in the rings (or in the previous carry's buffer).
func (s *Source) keep(recs []pending) {
	n := 0
	for i := range recs {
		r := &recs[i].rec
		n += len(r.Stack) + len(r.Comm) + len(r.Filename)
	}
	buf := make([]byte, 0, n)
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	s.carry = append(s.carry[:0], recs...)
	for i := range s.carry {
		r := &s.carry[i].rec
		r.Stack, r.Comm, r.Filename = clone(r.Stack), clone(r.Comm), clone(r.Filename)
	}
}

func (s *Source) fillSample(rec *Record) error {
	sm := &s.sample
	*sm = backend.Sample{TID: int(rec.TID)}
	switch rec.RegsABI {
	case unix.PERF_SAMPLE_REGS_ABI_64:
	case unix.PERF_SAMPLE_REGS_ABI_NONE:
		return fmt.Errorf("perfevent: thread %d: sample without user registers", rec.TID)
	default:
		return fmt.Errorf("perfevent: thread %d: sample of a 32-bit task (regs ABI %d)", rec.TID, rec.RegsABI)
	}
	if err := s.layout.Fill(rec.Regs[:rec.NumRegs], &sm.Regs); err != nil {
		return err
	}
	sm.StackAddr = sm.Regs.SP()
	sm.Stack = rec.Stack
	sm.Weight = time.Duration(rec.Period)
	sm.Time = s.wall.Add(time.Duration(int64(rec.Time) - s.mono))
	sm.MapsChanged = s.mapsMoved
	s.mapsMoved = false
	return nil
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

// onlineCPUs reads the online CPU list from sysfs.
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("perfevent: %w", err)
	}
	return ParseCPUList(string(b))
}

// ParseCPUList parses the kernel's CPU list format ("0-3,8,10-11\n").
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("perfevent: empty CPU list")
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > 1<<16 {
			return nil, fmt.Errorf("perfevent: CPU list %q: bad CPU %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > 1<<16 {
				return nil, fmt.Errorf("perfevent: CPU list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
