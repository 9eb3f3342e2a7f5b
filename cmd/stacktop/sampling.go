package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"time"

	"stacktop/debuginfo"
	"stacktop/internal/engine"
	"stacktop/internal/ptracesampler"
	"stacktop/internal/resolve"
	"stacktop/procmaps"
	"stacktop/ptrace"
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
	fs.Float64Var(&f.rate, "rate", ptracesampler.DefaultRate, "samples per second (jittered)")
	fs.BoolVar(&f.idle, "idle", false, "wall-clock profile: also count sleeping threads")
	f.stackWindow = ptracesampler.DefaultStackWindow
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

// engineOptions are a recording's: what the ptrace back end samples, and
// how long the engine runs and keeps its timeline.
type engineOptions struct {
	Rate               float64
	Idle               bool
	TIDs               []int
	Duration, Timeline time.Duration
}

func (f *samplingFlags) engineOptions() engineOptions {
	return engineOptions{Rate: f.rate, Idle: f.idle, TIDs: f.tids}
}

// resolveOptions are the resolver options of a periodic recording: line
// tables load in the background so no tick waits for a large DWARF index.
func (f *samplingFlags) resolveOptions() resolve.Options {
	return resolve.Options{Symbols: resolve.SymbolOptions{AsyncLines: true, CacheDir: dwarfCacheDir()},
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
	target *target
	engine *engine.Engine
}

// target is an attached process: the ptrace back end's source of samples
// and the resolver that names their stacks.
type target struct {
	PID int
	src *ptracesampler.Source
	res *resolve.Resolver
	mem *ptrace.Memory
}

// openTarget attaches to pid and loads its address space.
func openTarget(tr *ptrace.Tracer, pid int, cache *procmaps.ModuleCache, opts ptracesampler.Options, ropts resolve.Options) (*target, error) {
	if err := resolve.CheckClass(pid); err != nil {
		return nil, err // before attaching: nothing to undo
	}
	src, err := ptracesampler.Open(tr, pid, opts)
	if err != nil {
		return nil, err
	}
	mem := ptrace.NewMemory(pid)
	ropts.PACMask = src.PACMask()
	res, err := resolve.New(pid, mem, cache, ropts)
	if err != nil {
		src.Close()
		mem.Close()
		return nil, err
	}
	return &target{PID: pid, src: src, res: res, mem: mem}, nil
}

// Process gives access to the attached process (thread list, execs).
func (t *target) Process() *ptrace.Process { return t.src.Process() }

// UnwinderNames are the unwinding methods walks may use, for summaries.
func (t *target) UnwinderNames() []string { return t.res.UnwinderNames() }

// Close detaches from every thread. It is safe to call more than once.
func (t *target) Close() error {
	err := t.src.Close()
	t.res.Close()
	t.mem.Close()
	return err
}

// startSession attaches to -p's process, or starts cmdArgs with stdio and
// attaches to it before it execs, and prepares an engine with opts. The
// engine is made before the command is released, so the exec that follows
// counts as a change and the new image is loaded. The caller closes the
// target (detach) and then the session.
func (f *samplingFlags) startSession(tr *ptrace.Tracer, cmdArgs []string, stdio [3]*os.File, opts engineOptions) (*session, error) {
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
	t, err := openTarget(tr, pid, s.cache, ptracesampler.Options{Rate: opts.Rate, StackWindow: f.stackWindow, Idle: opts.Idle, TIDs: opts.TIDs},
		f.resolveOptions())
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
	s.engine = engine.New(t.src, t.res, engine.Options{Period: t.src.Period(), Duration: opts.Duration, Wall: opts.Idle, Timeline: opts.Timeline})
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
