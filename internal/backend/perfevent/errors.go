package perfevent

import (
	"errors"
	"fmt"
)

// ErrIdle is returned by Open for Options.Idle: the perf back end samples
// on-CPU time only (see the package doc).
var ErrIdle = errors.New("perfevent: --idle needs the ptrace back end: perf_event samples a thread only while it runs on a CPU")

// Why the kernel refused to sample.
type Refusal int

const (
	// RefusedParanoid: kernel.perf_event_paranoid forbids it to a process
	// without CAP_PERFMON.
	RefusedParanoid Refusal = iota + 1
	// RefusedPermission: stacktop may not observe that process (another
	// user's, or perf_event_paranoid >= 2 and not the same user).
	RefusedPermission
	// RefusedFiltered: stacktop has the capability yet got EPERM or
	// ENOSYS: a seccomp profile (containers) or an LSM blocks the call.
	RefusedFiltered
	// RefusedUnsupported: the kernel has no perf events (ENOSYS, ENOENT,
	// EOPNOTSUPP for the software cpu-clock event).
	RefusedUnsupported
	// RefusedMlock: the ring buffers exceed perf_event_mlock_kb and
	// RLIMIT_MEMLOCK.
	RefusedMlock
)

// A RefusedError reports that the kernel refused to open or map a sampling
// event. Its message is one or two lines: which limit, and what to do.
type RefusedError struct {
	Why      Refusal
	PID      int
	Paranoid int // kernel.perf_event_paranoid, -2 if unknown
	MlockKB  int // kernel.perf_event_mlock_kb, -1 if unknown
	Err      error
}

func (e *RefusedError) Unwrap() error { return e.Err }

func (e *RefusedError) Error() string {
	const alt = "or use --backend ptrace"
	switch e.Why {
	case RefusedParanoid:
		return fmt.Sprintf("perf_event_open refused (%v): kernel.perf_event_paranoid is %d\n"+
			"run as root, grant CAP_PERFMON, or set it to 2 (sysctl kernel.perf_event_paranoid=2), %s", e.Err, e.Paranoid, alt)
	case RefusedPermission:
		return fmt.Sprintf("perf_event_open refused (%v): no permission to sample process %d (perf_event_paranoid %d, no CAP_PERFMON)\n"+
			"run as the process's user or as root, or grant CAP_PERFMON, %s", e.Err, e.PID, e.Paranoid, alt)
	case RefusedFiltered:
		return fmt.Sprintf("perf_event_open refused (%v) although stacktop has CAP_PERFMON: a seccomp profile or security module blocks it\n"+
			"in a container allow perf_event_open (seccomp profile) and add CAP_PERFMON, %s", e.Err, alt)
	case RefusedUnsupported:
		return fmt.Sprintf("perf_event_open failed (%v): this kernel offers no software cpu-clock event (CONFIG_PERF_EVENTS), %s", e.Err, alt)
	case RefusedMlock:
		return fmt.Sprintf("mapping the perf ring buffers failed (%v): they exceed kernel.perf_event_mlock_kb (%d KiB) and ulimit -l\n"+
			"lower --rate or --stack-window, raise the sysctl or ulimit -l, run as root, %s", e.Err, e.MlockKB, alt)
	}
	return fmt.Sprintf("perf_event_open refused: %v", e.Err)
}
