package sampler

import (
	"time"

	"stacktop/internal/backend"
	"stacktop/internal/resolve"
	"stacktop/procmaps"
	"stacktop/profile"
	"stacktop/ptrace"
	"stacktop/regs"
	"stacktop/unwind"
)

// DefaultStackWindow is how many bytes above SP are copied while a thread is
// stopped. 16 KiB holds the frames of typical call chains; the rest is read
// live after the thread resumed.
const DefaultStackWindow = 16 << 10

// Options tune a Target.
type Options struct {
	StackWindow int // bytes copied above SP while stopped; 0 means DefaultStackWindow
	MaxDepth    int // frames per stack; 0 means unwind.DefaultMaxDepth
	Symbols     resolve.SymbolOptions
	NoCFI       bool // unwind with SFrame and frame pointers only
	// Unwinders is the ordered list of unwinding methods walks may use
	// (--unwinder); nil means the architecture's default. See
	// unwind.Options.Unwinders.
	Unwinders []unwind.Method
}

// ThreadStack is one thread's symbolised stack.
type ThreadStack struct {
	TID      int
	Name     string // comm
	State    string // R, S, D, T, t, ... as /proc shows it before the sample
	Frames   []profile.Frame
	Complete bool  // the walk reached the outermost frame
	Err      error // why the walk stopped early (Complete false), or the sample failed
	Stopped  time.Duration
	Total    time.Duration
	// linesPending holds the walk's frames when some frame's lines were
	// not ready (SymbolOptions.AsyncLines): Frames then say less than
	// they will, and the engine names the stack again once they are.
	linesPending []unwind.Frame
}

// SymbolOptions choose how much source detail symbolisation adds.
type SymbolOptions = resolve.SymbolOptions

// SignalFrameName is the name of a signal trampoline's frame.
const SignalFrameName = resolve.SignalFrameName

// ErrNot64Bit: the target runs a 32-bit program.
var ErrNot64Bit = resolve.ErrNot64Bit

// Target is an attached process.
type Target struct {
	PID    int
	Arch   regs.Arch
	proc   *ptrace.Process
	mem    *ptrace.Memory
	res    *resolve.Resolver
	opts   Options
	sample backend.Sample
}

// Open attaches to pid through tracer and loads its address space. cache may
// be shared between targets (the same libraries are opened once).
func Open(tracer *ptrace.Tracer, pid int, cache *procmaps.ModuleCache, opts Options) (*Target, error) {
	if opts.StackWindow <= 0 {
		opts.StackWindow = DefaultStackWindow
	}
	if err := resolve.CheckClass(pid); err != nil {
		return nil, err
	}
	proc, err := tracer.Attach(pid)
	if err != nil {
		return nil, err
	}
	mask, _ := proc.PACMask()
	mem := ptrace.NewMemory(pid)
	res, err := resolve.New(pid, mem, cache, resolve.Options{MaxDepth: opts.MaxDepth, Symbols: opts.Symbols,
		NoCFI: opts.NoCFI, Unwinders: opts.Unwinders, PACMask: mask})
	if err != nil {
		proc.Detach()
		mem.Close()
		return nil, err
	}
	return &Target{PID: pid, Arch: res.Arch, proc: proc, mem: mem, res: res, opts: opts}, nil
}

// Process gives access to the attached process (freeze, thread list).
func (t *Target) Process() *ptrace.Process { return t.proc }

// UnwinderNames are the unwinding methods walks may use, as names.
func (t *Target) UnwinderNames() []string { return t.res.UnwinderNames() }

// Close detaches from every thread. It is safe to call more than once.
func (t *Target) Close() error {
	err := t.proc.Detach()
	t.mem.Close()
	t.res.Close()
	return err
}

func (t *Target) reload() error {
	err := t.res.Reload()
	t.Arch = t.res.Arch
	return err
}

func (t *Target) setSample(s *ptrace.Sample) {
	t.sample = backend.Sample{TID: s.TID, Regs: s.Regs, StackAddr: s.StackAddr, Stack: s.Stack}
}

// unwind walks the stack of the sample just taken and symbolises it.
func (t *Target) unwind(ts *ThreadStack) {
	st := t.res.Resolve(&t.sample)
	ts.Frames, ts.Complete, ts.Err, ts.linesPending = st.Frames, st.Complete, st.Err, st.Pending
}
