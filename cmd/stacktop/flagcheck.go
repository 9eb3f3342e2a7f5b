package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// Numeric flags are checked here, after parsing and before anything is
// attached, so a nonsense value is a usage error (exitUsage) within
// milliseconds instead of a run that never ends (--rate NaN) or an
// out-of-memory crash (--stack-window 1TiB). Each subcommand lists its
// checks in one call to checkFlags; a new numeric flag adds one line.

// Ceilings of the numeric flags, documented in docs/record.md.
const (
	// maxRate is the highest --rate: a tick every 100 µs, already shorter
	// than one thread's stop-copy-resume on most machines.
	maxRate = 10000
	// minRate is the lowest --rate: a sample a second. Below it a
	// recording of any useful length holds no sample at all.
	minRate = 1
	// maxStackWindowCeiling caps --stack-window: the window is copied
	// while the thread is stopped, some 4-5 ms a MiB on this project's
	// VM (--stack-window 256MiB once paused a thread 1.19 s), so 1 MiB
	// keeps a stop within a few ms. It is also what a dump copies of a
	// thread's used stack by default; a deeper stack is read from the
	// live process after the thread resumed.
	maxStackWindowCeiling = 1 << 20
	// maxDuration bounds --duration and top's --window: long enough for
	// any recording, short enough that the value is not an overflow.
	maxDuration = 366 * 24 * time.Hour
)

// maxStackWindow is the largest --stack-window: RLIMIT_STACK's hard limit
// (the largest stack the kernel lets a process grow) where that is below
// maxStackWindowCeiling, else the ceiling.
func maxStackWindow() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &rl); err == nil && rl.Max != unix.RLIM_INFINITY && rl.Max < maxStackWindowCeiling {
		return int(rl.Max)
	}
	return maxStackWindowCeiling
}

// checkFlags returns the errors of the given checks joined (nil when all
// passed), so the user sees every bad value at once.
func checkFlags(errs ...error) error { return errors.Join(errs...) }

// reportUsage prints err (one "stacktop:" line per failed check) and
// cmd's usage lines, and returns the usage exit code.
func reportUsage(cmd *cobra.Command, err error) int {
	fmt.Fprintln(os.Stderr, "stacktop:", strings.ReplaceAll(err.Error(), "\n", "\nstacktop: "))
	writeUsage(os.Stderr, cmd)
	return exitUsage
}

// checkFloat requires a finite v in (0, max].
func checkFloat(name string, v, max float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("--%s %v: not a finite number; give a value in (0, %g]", name, v, max)
	case v <= 0:
		return fmt.Errorf("--%s %g: must be positive, at most %g", name, v, max)
	case v > max:
		return fmt.Errorf("--%s %g: above the ceiling of %g", name, v, max)
	}
	return nil
}

// checkSize requires a byte count in (0, max].
func checkSize(name string, v, max int) error {
	if v <= 0 || v > max {
		return fmt.Errorf("--%s %d: must be between 1 byte and %s", name, v, formatSize(max))
	}
	return nil
}

// checkDuration requires d in (0, max]. Flags whose zero value means
// "unset" pass set false when the user did not give them (see flagGiven).
func checkDuration(name string, d, max time.Duration, set bool) error {
	if !set {
		return nil
	}
	if d <= 0 || d > max {
		return fmt.Errorf("--%s %v: must be positive, at most %v", name, d, max)
	}
	return nil
}

// flagGiven reports whether the command line set the named flag.
func flagGiven(fs *pflag.FlagSet, name string) bool { return fs.Changed(name) }

// sizeValue is a pflag.Value for byte counts: a plain number of bytes or
// one with a binary suffix (16KiB, 1MiB, 1GiB, 1TiB; K, M, G, T alike).
// Range checks are checkSize's: Set accepts any int it can represent.
type sizeValue struct{ p *int }

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v sizeValue) Type() string { return "size" }

func (v sizeValue) Set(s string) error {
	num, shift := strings.TrimSpace(s), 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}, {"B", 0}} {
		if strings.HasSuffix(num, u.suffix) {
			num, shift = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return fmt.Errorf("not a byte count (e.g. 16384, 64KiB, 1MiB)")
	}
	if n > math.MaxInt>>shift || n < math.MinInt>>shift {
		return fmt.Errorf("%s bytes is out of range", s)
	}
	*v.p = int(n << shift)
	return nil
}

func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
