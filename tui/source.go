package tui

import (
	"io"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// Source is what the UI polls, once per refresh interval, from a goroutine
// of its own (never the one that draws). An implementation returns at once:
// it copies its counters and takes (*profile.Profile).Snapshot under its own
// lock, and must not wait for the next sample.
type Source interface {
	Snapshot() Status
}

// Status is one poll's view of the sampler. The UI only reads it; Profile
// must be a snapshot nobody writes to any more.
type Status struct {
	Profile *profile.Profile // immutable snapshot; nil before the first sample
	Rate    float64          // achieved sampling rate, Hz
	Pause   PauseStats       // how long each thread was stopped per sample
	Threads int              // threads currently attached
	Lost    int64            // samples the kernel dropped (perf back end: ring full)
	Exited  bool             // the target is gone; Profile is final
	ExitMsg string           // why, e.g. "exit status 0" or "killed by SIGKILL"
	Err     error            // last sampler error worth showing, if any
	// Notes say what the stacks lack and how to get it (a Go program
	// without DWARF, perf without kernel time, throttling), one line each.
	Notes []string
}

// PauseStats summarises the time one thread stays stopped to take one
// sample, the cost the target pays for being profiled.
type PauseStats struct {
	Median, P99, Max time.Duration
}

// Options configure the UI. The zero value is usable.
type Options struct {
	// Window is the length of the sliding window ("last N seconds");
	// default 5s.
	Window time.Duration
	// Cumulative starts the UI showing everything since the start instead
	// of the sliding window (toggle with w).
	Cumulative bool
	// Refresh is how often the Source is polled; default 500ms.
	Refresh time.Duration
	// StackFrames is how many frames of each thread's latest stack the
	// threads view shows; default 4.
	StackFrames int
	// RateAsked is the sampling rate the user asked for, shown next to
	// the achieved one; 0 shows the achieved rate alone.
	RateAsked float64
	// NoStops tells a back end that does not stop threads (perf): the
	// header shows the asked rate per second of a thread's CPU time and
	// no pause figures.
	NoStops bool
	// SortByTotal starts the functions view sorted by total instead of
	// self (t and s switch).
	SortByTotal bool
	// NoColor renders without any ANSI colour or attribute. It is also
	// on when the NO_COLOR environment variable is set and not empty
	// (https://no-color.org), read when the model is created.
	NoColor bool

	// Input and Output default to the process's terminal (stdin, stdout).
	// Tests and embedders can pass their own; a non-terminal Output gets
	// no raw mode and no colour unless forced.
	Input  io.Reader
	Output io.Writer
}

const (
	defaultWindow      = 5 * time.Second
	defaultRefresh     = 500 * time.Millisecond
	defaultStackFrames = 4
)

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = defaultWindow
	}
	if o.Refresh <= 0 {
		o.Refresh = defaultRefresh
	}
	if o.StackFrames <= 0 {
		o.StackFrames = defaultStackFrames
	}
	return o
}
