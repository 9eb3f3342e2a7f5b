package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"

	"stacktop/debuginfo"
	"stacktop/procmaps"
	"stacktop/ptrace"
	"stacktop/sampler"
	"stacktop/unwind"
)

// samplingFlags are the flags record and top share: what to sample and how.
type samplingFlags struct {
	pid         int
	pids        pidList // every -p; pid is the first
	tidList     string
	threadName  string
	rate        float64
	idle        bool
	stackWindow int
	subprocs    bool
	unwinders   unwinderFlags

	tids     []int           // parsed from tidList by check
	threadRE *regexp.Regexp  // compiled from threadName by check; nil: all
	methods  []unwind.Method // parsed from unwinders by check
}

func (f *samplingFlags) register(fs *flag.FlagSet, verb string) {
	fs.Var(&f.pids, "p", "process to "+verb+" (PID; a comma-separated list, or repeat -p, for several)")
	fs.StringVar(&f.tidList, "tid", "", verb+" only these threads (comma-separated TIDs)")
	fs.StringVar(&f.threadName, "thread-name", "", verb+" only threads whose name matches this regular expression")
	fs.BoolVar(&f.subprocs, "subprocesses", false, "also "+verb+" the children the processes start meanwhile, until they exit")
	fs.Float64Var(&f.rate, "rate", sampler.DefaultRate, "samples per second (jittered)")
	fs.BoolVar(&f.idle, "idle", false, "wall-clock profile: also count sleeping threads")
	f.stackWindow = sampler.DefaultStackWindow
	fs.Var(sizeValue{&f.stackWindow}, "stack-window", "bytes of stack copied while a thread is stopped (e.g. 16384, 64KiB)")
	f.unwinders.register(fs)
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
	if f.threadName != "" {
		re, err := regexp.Compile(f.threadName)
		if err != nil {
			return fmt.Errorf("--thread-name: %v", err)
		}
		f.threadRE = re
	}
	if err := checkFlags(
		checkFloat("rate", f.rate, maxRate),
		checkSize("stack-window", f.stackWindow, maxStackWindow()),
	); err != nil {
		return err
	}
	var err error
	if f.methods, err = f.unwinders.methods(); err != nil {
		return err
	}
	f.tids, err = parseTIDs(f.tidList)
	return err
}

func (f *samplingFlags) engineOptions() sampler.EngineOptions {
	// Detached as soon as sampling ends, not after the lines still
	// loading: a signal or --duration leaves the target untraced at once.
	return sampler.EngineOptions{Rate: f.rate, Idle: f.idle, TIDs: f.tids, DetachAtEnd: true}
}

// targetOptions are the sampler options of a periodic recording: line
// tables load in the background so no tick waits for a large DWARF index.
func (f *samplingFlags) targetOptions() sampler.Options {
	return sampler.Options{StackWindow: f.stackWindow, Symbols: sampler.SymbolOptions{AsyncLines: true, CacheDir: dwarfCacheDir()},
		NoCFI: f.unwinders.noCFI, Unwinders: f.methods}
}

// dwarfCacheDir is where decompressed DWARF is kept between runs (see
// debuginfo.Cache): under the user's cache directory, unless
// STACKTOP_NO_CACHE is set.
func dwarfCacheDir() string {
	if os.Getenv("STACKTOP_NO_CACHE") != "" {
		return ""
	}
	return debuginfo.DefaultCacheDir()
}

// session is what record and top sample: an attached target and its
// engine, and the command stacktop started when run with -- CMD.
type session struct {
	child  *spawned // nil with -p
	cache  *procmaps.ModuleCache
	target *sampler.Target
	engine *sampler.Engine
}

// startSession attaches to -p's process, or starts cmdArgs with stdio and
// attaches to it before it execs, and prepares an engine with opts. The
// engine is made before the command is released, so the exec that follows
// counts as a change and the new image is loaded. The caller closes the
// target (detach) and then the session.
func (f *samplingFlags) startSession(tr *ptrace.Tracer, cmdArgs []string, stdio [3]*os.File, opts sampler.EngineOptions) (*session, error) {
	s := &session{cache: procmaps.NewModuleCache()}
	pid := f.pid
	if len(cmdArgs) > 0 {
		child, err := startCommand(cmdArgs, stdio)
		if err != nil {
			s.close()
			return nil, err
		}
		s.child, pid = child, child.pid
	}
	t, err := sampler.Open(tr, pid, s.cache, f.targetOptions())
	if err != nil {
		s.close()
		return nil, err
	}
	s.target = t
	if s.child == nil {
		if err := checkTIDs(pid, f.tids, t.Process().Threads()); err != nil {
			t.Close()
			s.close()
			return nil, err
		}
	}
	s.engine = sampler.NewEngine(t, opts)
	sampleOnOneCPU()
	if s.child != nil {
		if err := s.child.release(); err != nil {
			t.Close()
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// sampleOnOneCPU runs stacktop's Go code on one CPU from here on, unless
// the user set GOMAXPROCS. A tick is serial: the engine hands its batch to
// the tracer thread and waits for it. With more Ps, every hand-off makes
// the runtime wake an idle thread that spins looking for work, on a CPU
// the target wants, right while a sampled thread is being stopped. On a
// 2-core VM (bench/pause.sh, and 1,000 threads at 99 and 999 Hz) one P
// cut the median from PTRACE_INTERRUPT to the resume from 87-96 µs to
// 76 µs at 499 Hz, and stacktop's own CPU by 10-20%; it costs a slower
// first second while line tables load in the background.
func sampleOnOneCPU() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// close releases what the session holds besides the target: the module
// cache, and a command that never ran or whose status nobody collected.
func (s *session) close() {
	if s.child != nil {
		s.child.abandon()
	}
	s.cache.Close()
}

// parse parses a sampling subcommand's flags (registered on fs, f's among
// them) and checks them; valid adds the subcommand's own checks, run after
// parsing (checkFlags and friends, flagcheck.go). It returns the arguments after the flags (the command to
// start, if any), or ok false and the exit code when there is nothing to
// run (-h, or a usage error, which it reports).
func (f *samplingFlags) parse(fs *flag.FlagSet, args []string, valid func() error) (cmdArgs []string, code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, 0, false
		}
		return nil, exitUsage, false
	}
	cmdArgs = fs.Args()
	if err := checkFlags(f.check(cmdArgs), valid()); err != nil {
		return nil, reportUsage(fs, err), false
	}
	return cmdArgs, 0, true
}
