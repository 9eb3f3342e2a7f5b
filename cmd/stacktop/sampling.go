package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/internal/backend/perfevent"
	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/idlist"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/session"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/regs"
)

// samplingFlags are the flags record and top share: what to sample and how.
type samplingFlags struct {
	stackFlags
	pidFlags
	rate     float64
	idle     bool
	subprocs bool
	backend  session.Backend
}

func (f *samplingFlags) addTo(fs *pflag.FlagSet, verb string) {
	f.pidFlags.addTo(fs, verb)
	f.stackFlags.addTo(fs, verb)
	fs.BoolVarP(&f.subprocs, "subprocesses", "s", false, "also "+verb+" the children the processes start meanwhile, until they exit")
	setGroup(fs, groupTarget, "subprocesses")
	fs.Float64VarP(&f.rate, "rate", "r", ptracesampler.DefaultRate, "samples per second (jittered; with --backend perf, per second of a thread's CPU time)")
	f.backend = session.Ptrace
	fs.Var(backendValue{&f.backend}, "backend", "how samples are taken: ptrace (stop each thread briefly), perf (the kernel copies the stack at a timer tick; on-CPU only), or auto (perf where allowed, else ptrace)")
	fs.BoolVarP(&f.idle, "idle", "i", false, "wall-clock profile: also count sleeping threads")
	setGroup(fs, groupSampling, "rate", "backend", "idle")
}

// pidFlags is -p, --pid: the processes record and top attach to, or,
// with one set, the one process dump attaches to.
type pidFlags struct {
	pid  int         // the process; with a list, the first (set by check)
	pids idlist.PIDs // every -p of a list
	// one: -p takes a single PID, and a PID no process can have is left
	// to the attach to report, as any other that does not exist
	// (idlist.PID).
	one bool
}

func (f *pidFlags) addTo(fs *pflag.FlagSet, verb string) {
	var value pflag.Value = typedValue{&f.pids, "pids"}
	usage := "process to " + verb + " (PID; a comma-separated list, or repeat -p, for several)"
	if f.one {
		value, usage = typedValue{(*idlist.PID)(&f.pid), "pid"}, "process to "+verb+" (or the PID alone, as the first argument)"
	}
	fs.VarP(value, "pid", "p", usage)
	setGroup(fs, groupTarget, "pid")
}

// check validates the flags against the command line's remaining
// arguments (-- CMD): exactly one of -p and a command.
func (f *samplingFlags) check(cmdArgs []string) error {
	if len(f.pids) > 0 {
		f.pid = f.pids[0]
	}
	if (f.pid > 0) == (len(cmdArgs) > 0) || f.pid < 0 {
		return fmt.Errorf("give either -p PID or -- CMD")
	}
	var perfErr error
	switch {
	case f.backend != session.Perf:
	case f.idle:
		perfErr = session.ErrIdlePerf
	case f.stackWindow%8 != 0 || f.stackWindow > perfevent.MaxWindow(regs.Host()):
		perfErr = fmt.Errorf("--stack-window %d: the perf back end copies a multiple of 8 bytes, at most %d (a sample record is at most 64 KiB)",
			f.stackWindow, perfevent.MaxWindow(regs.Host()))
	}
	rateErr := checkFloat("rate", f.rate, maxRate)
	if rateErr == nil && f.rate < minRate {
		// --rate 1e-300 sampled nothing and exited 0.
		rateErr = fmt.Errorf("--rate %g: below %d Hz; give a rate in [%d, %d]", f.rate, minRate, minRate, maxRate)
	}
	return checkFlags(rateErr, f.stackFlags.check(), perfErr)
}

// sessionOptions are the options of a periodic recording: line tables
// load in the background so no tick waits for a large DWARF index.
func (f *samplingFlags) sessionOptions() session.Options {
	window := f.stackWindow
	if !f.stackWindowGiven {
		window = 0 // the back end's default
	}
	return session.Options{Backend: f.backend, Rate: f.rate, Idle: f.idle, TIDs: []int(f.tids),
		StackWindow: window,
		Resolve:     f.resolveOptions(resolve.SymbolOptions{AsyncLines: true, CacheDir: dwarfCacheDir()})}
}

// dwarfCacheDir is where decompressed DWARF, symbol tables and function
// names are kept between runs (see debuginfo.Cache): under the user's
// cache directory, unless STACKTOP_NO_CACHE is set.
func dwarfCacheDir() string {
	if os.Getenv("STACKTOP_NO_CACHE") != "" {
		return ""
	}
	return debuginfo.DefaultCacheDir()
}

// startSession attaches to -p's process, or starts cmdArgs with stdio and
// watches it before it execs, with the back end and options f and opts
// ask for (internal/session). The caller detaches and then closes it.
func (f *samplingFlags) startSession(tr *ptrace.Tracer, cmdArgs []string, stdio [3]*os.File, opts session.Options) (*session.Session, error) {
	return session.Start(tr, f.pid, cmdArgs, stdio, opts)
}

// checkArgs checks a sampling subcommand's flags, parsed by cobra, against
// its arguments after the flags (the command to start, if any); valid adds
// the subcommand's own checks (checkFlags and friends, flagcheck.go). On a
// usage error, which it reports, it returns ok false and the exit code.
func (f *samplingFlags) checkArgs(cmd *cobra.Command, cmdArgs []string, valid func() error) (code int, ok bool) {
	if err := checkFlags(f.check(cmdArgs), valid()); err != nil {
		return reportUsage(cmd, err), false
	}
	return 0, true
}

// backendValue is the --backend flag.
type backendValue struct{ b *session.Backend }

func (v backendValue) String() string {
	if v.b == nil {
		return ""
	}
	return string(*v.b)
}

func (v backendValue) Type() string { return "backend" }

func (v backendValue) Set(s string) error {
	b, err := session.ParseBackend(s)
	if err == nil {
		*v.b = b
	}
	return err
}
