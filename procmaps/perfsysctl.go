package procmaps

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PerfEventSysctls are the kernel settings that decide whether, and how
// much, an unprivileged perf_event_open may sample (see the kernel's
// Documentation/admin-guide/perf-security.rst).
type PerfEventSysctls struct {
	// Paranoid is kernel.perf_event_paranoid: -1 no restriction, 0 no
	// raw tracepoints, 1 no CPU-wide events, 2 no kernel profiling, 3+
	// (a distribution patch) no perf_event_open at all without
	// CAP_PERFMON.
	Paranoid int
	// MlockKB is kernel.perf_event_mlock_kb: the ring-buffer memory an
	// unprivileged user may pin beyond RLIMIT_MEMLOCK.
	MlockKB int
}

// ReadPerfEventSysctls reads /proc/sys/kernel/perf_event_paranoid and
// perf_event_mlock_kb. A missing file (no CONFIG_PERF_EVENTS) is an error
// wrapping fs.ErrNotExist.
func ReadPerfEventSysctls() (PerfEventSysctls, error) {
	var s PerfEventSysctls
	var err error
	if s.Paranoid, err = readSysctlInt("/proc/sys/kernel/perf_event_paranoid"); err != nil {
		return s, err
	}
	if s.MlockKB, err = readSysctlInt("/proc/sys/kernel/perf_event_mlock_kb"); err != nil {
		return s, err
	}
	return s, nil
}

func readSysctlInt(name string) (int, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, fmt.Errorf("procmaps: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("procmaps: %s: %q is not a number", name, strings.TrimSpace(string(b)))
	}
	return v, nil
}
