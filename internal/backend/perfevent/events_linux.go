package perfevent

// Opening a thread's events: one per CPU, writing into the CPU's shared
// ring, with kernel time included where the kernel allows it; a refusal
// is classified (refused) for the user.

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

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
