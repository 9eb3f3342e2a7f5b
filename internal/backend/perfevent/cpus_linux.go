package perfevent

// The online CPUs, from sysfs's list in the kernel's CPU list format: a
// Source opens one event per thread and CPU, and one ring per CPU.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

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
