// Package session opens what `record` and `top` sample: one process,
// attached by PID or started from a command, one back end's
// backend.Source over it, the resolve.Resolver that names its stacks, and
// the engine.Engine that aggregates them.
//
// Lifecycle: Start returns a Session whose engine has taken no sample yet
// (a command it started is released, and execs, only once the back end
// watches it, so the exec is seen and the new image loaded). The caller
// runs Engine.Run, then calls Detach (the target runs as if stacktop had
// never been there) and Close (module cache, a command that never ran) on
// every path. Several sessions may share one ptrace.Tracer.
//
// The back-end switch is here and nowhere else: a new back end is one
// package that implements backend.Source and one case in open.
package session

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/backend/perfevent"
	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/engine"
	"codeberg.org/stacktop/stacktop/internal/idlist"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/spawn"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// Backend names a way of taking samples (--backend).
type Backend string

const (
	// Ptrace stops each sampled thread for its registers and stack
	// (internal/backend/ptracesampler): needs only ptrace permission, samples
	// every thread, on- or off-CPU.
	Ptrace Backend = "ptrace"
	// Perf lets the kernel copy registers and stack at a timer interrupt
	// (internal/backend/perfevent): no thread is stopped; on-CPU only.
	Perf Backend = "perf"
	// Auto is Perf where the kernel allows it, else Ptrace.
	Auto Backend = "auto"
)

// Backends are the values --backend accepts.
var Backends = []Backend{Ptrace, Perf, Auto}

// ParseBackend checks a --backend value.
func ParseBackend(s string) (Backend, error) {
	if b := Backend(s); slices.Contains(Backends, b) {
		return b, nil
	}
	return "", fmt.Errorf("--backend %q: want ptrace, perf or auto", s)
}

// ErrIdlePerf is Start's error for a wall-clock profile asked of the perf
// back end, whose timer counts only while a thread is on a CPU.
var ErrIdlePerf = errors.New("--idle needs --backend ptrace: the perf back end's timer (cpu-clock) counts only while a thread runs, so it never samples a sleeping thread")

// Options configure a Session.
type Options struct {
	Backend     Backend // "" means Ptrace
	Rate        float64 // samples per second (per thread on CPU, for perf); 0: the back end's default
	Idle        bool    // wall-clock profile (ptrace only)
	TIDs        []int   // sample only these threads; nil: all
	StackWindow int     // stack bytes copied per sample; 0: the back end's default
	Duration    time.Duration
	Timeline    time.Duration // engine.Options.Timeline
	Resolve     resolve.Options
}

// Session is one sampled process.
type Session struct {
	PID int
	// Backend is the back end that runs (Auto resolved), and Fallback why
	// Auto did not choose perf ("" if it did, or was not asked).
	Backend  Backend
	Fallback string
	Engine   *engine.Engine
	Child    *spawn.Cmd // the started command; nil with a PID

	cache *modules.ModuleCache
	src   backend.Source
	// The back end behind src (perf's may sit behind the --tid filter):
	// one of the two, the other nil.
	perf   *perfevent.Source
	ptrace *ptracesampler.Source
	res    *resolve.Resolver
	mem    *ptrace.Memory
}

// Start attaches to pid, or, with a command, starts it with stdio and
// watches it before it execs; then it prepares the engine. tr is used by
// the ptrace back end (and may be nil with perf).
func Start(tr *ptrace.Tracer, pid int, command []string, stdio [3]*os.File, o Options) (*Session, error) {
	if o.Idle && o.Backend == Perf {
		return nil, ErrIdlePerf
	}
	s := &Session{cache: modules.NewModuleCache()}
	if len(command) > 0 {
		child, err := spawn.Start(command, stdio)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Child, pid = child, child.PID()
	}
	s.PID = pid
	if err := resolve.CheckClass(pid); err != nil {
		s.Close()
		return nil, err // before attaching: nothing to undo
	}
	if s.Child == nil && len(o.TIDs) > 0 {
		// A command has no threads to name yet; a process is checked
		// before anything is attached (one that cannot be listed is left
		// to the back end to explain).
		if threads, err := procmaps.Threads(pid); err == nil {
			if err := idlist.CheckThreads(pid, o.TIDs, threads); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	if err := s.open(tr, o); err != nil {
		s.Close()
		return nil, err
	}
	s.mem = ptrace.NewMemory(pid)
	ropts := o.Resolve
	if s.ptrace != nil {
		ropts.PACMask = s.ptrace.PACMask()
	}
	res, err := resolve.New(pid, s.mem, s.cache, ropts)
	if err != nil {
		s.Detach()
		s.Close()
		return nil, err
	}
	s.res = res
	period := time.Duration(float64(time.Second) / o.rate())
	s.Engine = engine.New(s.src, res, engine.Options{Period: period, Duration: o.Duration, Wall: o.Idle, Timeline: o.Timeline,
		// The target is released as soon as sampling ends (a signal,
		// --duration), not after the lines still loading.
		CloseAtEnd: true, Notes: s.notes})
	if s.Backend == Ptrace {
		sampleOnOneCPU()
	}
	if s.Child != nil {
		if err := s.Child.Release(); err != nil {
			s.Detach()
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (o Options) rate() float64 {
	if o.Rate > 0 {
		return o.Rate
	}
	return ptracesampler.DefaultRate
}

// open starts the back end o asks for: the one switch over back ends.
func (s *Session) open(tr *ptrace.Tracer, o Options) error {
	b := o.Backend
	if b == "" {
		b = Ptrace
	}
	if b == Auto && o.Idle {
		b, s.Fallback = Ptrace, "--idle needs ptrace"
	}
	if b == Perf || b == Auto {
		src, err := perfevent.Open(s.PID, perfevent.Options{Rate: o.rate(), Window: o.StackWindow})
		var refused *perfevent.RefusedError
		switch {
		case err == nil:
			s.Backend, s.src, s.perf = Perf, onlyThreads(src, o.TIDs), src
			return nil
		case b == Auto && errors.As(err, &refused):
			s.Fallback = refused.Error()
		case b == Auto:
			// Whatever kept perf from starting (open files, a window
			// perf cannot carry), ptrace may still sample.
			s.Fallback = err.Error()
		default:
			return err
		}
	}
	src, err := ptracesampler.Open(tr, s.PID, ptracesampler.Options{Rate: o.Rate, StackWindow: o.StackWindow, Idle: o.Idle, TIDs: o.TIDs})
	if err != nil {
		return err
	}
	s.Backend, s.src, s.ptrace = Ptrace, src, src
	return nil
}

// Execs is how many times the process replaced its program while watched.
// Call it after Engine.Run returned.
func (s *Session) Execs() int {
	if s.perf != nil {
		return int(s.perf.Stats().Execs)
	}
	return s.ptrace.Process().Execs()
}

// notes are one-line notes for the user about what the back end could
// not sample: the engine's Options.Notes, asked on Run's goroutine after
// each round (the perf source's counters are that goroutine's).
func (s *Session) notes() []string {
	if s.perf == nil {
		return nil
	}
	var notes []string
	st := s.perf.Stats()
	if st.KernelExcluded {
		notes = append(notes, "perf: the kernel allowed user-mode samples only (perf_event_paranoid >= 2 without CAP_PERFMON): time in system calls is not in the profile")
	}
	if st.Throttled > 0 {
		notes = append(notes, fmt.Sprintf("perf: the kernel throttled sampling %d times (kernel.perf_event_max_sample_rate): the profile holds fewer samples than the CPU time asks", st.Throttled))
	}
	if st.OtherProcs > 0 {
		notes = append(notes, fmt.Sprintf("perf: %d samples of child processes dropped (record them with --subprocesses and --backend ptrace)", st.OtherProcs))
	}
	return notes
}

// UnwinderNames are the unwinding methods walks may use, for summaries.
func (s *Session) UnwinderNames() []string { return s.res.UnwinderNames() }

// Detach stops sampling and releases the process: no thread stays
// stopped, traced or watched. It is safe to call more than once.
func (s *Session) Detach() error {
	var err error
	if s.src != nil {
		err = s.src.Close()
	}
	if s.res != nil {
		s.res.Close()
	}
	if s.mem != nil {
		s.mem.Close()
	}
	return err
}

// Close releases what the session holds besides the process: the module
// cache, and a command that never ran or whose status nobody collected.
// Call it after Detach.
func (s *Session) Close() {
	if s.Child != nil {
		s.Child.Abandon()
	}
	s.cache.Close()
}

// sampleOnOneCPU runs stacktop's Go code on one CPU from here on, unless
// the user set GOMAXPROCS. A ptrace tick is serial: the engine hands its
// batch to the tracer thread and waits for it. With more Ps, every
// hand-off makes the runtime wake an idle thread that spins looking for
// work, on a CPU the target wants, right while a sampled thread is being
// stopped. On a 2-core VM (bench/pause.sh, and 1,000 threads at 99 and
// 999 Hz) one P cut the median from PTRACE_INTERRUPT to the resume from
// 87-96 µs to 76 µs at 499 Hz, and stacktop's own CPU by 10-20%; it costs
// a slower first second while line tables load in the background.
func sampleOnOneCPU() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
