package sampler

import (
	"fmt"
	"slices"
	"time"

	"stacktop/backchain"
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
	Symbols     SymbolOptions
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

// Target is an attached process.
type Target struct {
	PID   int
	Arch  regs.Arch
	proc  *ptrace.Process
	mem   *ptrace.Memory
	cache *procmaps.ModuleCache
	space *procmaps.AddressSpace
	mods  moduleIndex
	syms  *symbolizer
	// pacMask is cleared from arm64 return addresses (0: nothing to strip).
	pacMask   uint64
	backChain backchain.Unwinder // s390x fallback; reads t.mods at call time
	opts      Options
	tails     *tailCalls // DWARF call sites per module (tailcall.go)
	goStacks  goStacks   // Go's systemstack/morestack switches (gostack.go)
	// funcAtFn is t.funcAt bound once, so a walk does not allocate it.
	funcAtFn func(pc uint64) (start, end uint64, ok bool)

	// stackOf bounds frames a signal interrupted on another stack than
	// the handler's (sigaltstack) by their own mapping; reads t.space at
	// call time.
	stackOf unwind.StackFinder
	perfMap perfMap // names of JIT code (anonymous executable memory)

	walker unwind.Walker
	sample ptrace.Sample
	window unwind.StackWindow
}

// Open attaches to pid through tracer and loads its address space. cache may
// be shared between targets (the same libraries are opened once).
func Open(tracer *ptrace.Tracer, pid int, cache *procmaps.ModuleCache, opts Options) (*Target, error) {
	if opts.StackWindow <= 0 {
		opts.StackWindow = DefaultStackWindow
	}
	if err := checkClass(pid); err != nil {
		return nil, err
	}
	proc, err := tracer.Attach(pid)
	if err != nil {
		return nil, err
	}
	t := &Target{PID: pid, proc: proc, mem: ptrace.NewMemory(pid), cache: cache, opts: opts, syms: newSymbolizer(),
		perfMap: perfMap{pid: pid}}
	if err := t.refresh(); err != nil {
		proc.Detach()
		return nil, fmt.Errorf("reading the address space of %d: %w", pid, err)
	}
	t.Arch = t.arch()
	if err := t.checkUnwinders(); err != nil {
		proc.Detach()
		return nil, err
	}
	t.funcAtFn = t.funcAt
	t.tails = &tailCalls{}
	// arm64 return addresses may carry a pointer-authentication code; the
	// mask of its bits is per process (NT_ARM_PAC_MASK). 0 elsewhere.
	t.pacMask, _ = proc.PACMask()
	t.stackOf = func(sp uint64) (unwind.StackBounds, bool) {
		m, ok := t.space.MappingAt(sp)
		return unwind.StackBounds{Low: m.Start, High: m.End}, ok
	}
	t.backChain = backchain.Unwinder{
		InVDSO: func(pc uint64) bool { m, ok := t.mods.ModuleAt(pc); return ok && m.IsVDSO },
		IsCode: func(pc uint64) bool { _, ok := t.mods.ModuleAt(pc); return ok },
		FuncAt: t.funcAtFn,
	}
	return t, nil
}

// arch is the target's architecture, from its objects' ELF headers (all
// objects of one process share it), so an s390x snapshot unwinds the
// same on any host.
func (t *Target) arch() regs.Arch {
	for i := range t.space.Exec {
		if m := t.space.Exec[i].Module; m != nil && m.Arch != regs.ArchUnknown {
			return m.Arch
		}
	}
	return regs.ArchUnknown
}

// Process gives access to the attached process (freeze, thread list).
func (t *Target) Process() *ptrace.Process { return t.proc }

// Close detaches from every thread. It is safe to call more than once.
func (t *Target) Close() error {
	err := t.proc.Detach()
	t.mem.Close()
	t.syms.close()
	return err
}

// refresh reloads /proc/PID/maps (cheaply: an unchanged file keeps the old
// snapshot) and rebuilds the module index the unwinder searches.
func (t *Target) refresh() error {
	var (
		space *procmaps.AddressSpace
		err   error
	)
	if t.space == nil {
		space, err = procmaps.LoadAddressSpace(t.PID, t.cache)
	} else {
		space, err = t.space.Refresh()
	}
	if err != nil {
		return err
	}
	if space != t.space {
		// The vDSO has no file: its image comes from the target's memory,
		// so its symbols and unwind tables are there for the unwinder.
		attachVDSO(space, t.mem)
		t.space = space
		t.mods = newModuleIndex(space)
		t.goStacks.update(space)
	}
	return nil
}

// reload drops the address space and reads it again from scratch: after an
// execve every mapping, module and symbol table of the old image is stale.
func (t *Target) reload() error {
	t.space = nil
	t.perfMap = perfMap{pid: t.PID} // the new program writes its own
	if err := t.refresh(); err != nil {
		return err
	}
	t.Arch = t.arch()
	return nil
}

// unwind walks the stack of the sample just taken and symbolises it.
func (t *Target) unwind(ts *ThreadStack) {
	st := t.walk()
	ts.Complete, ts.Err = st.Complete, st.Err
	var pending bool
	ts.Frames, pending = t.symbolizeFrames(st.Frames, t.opts.Symbols)
	if pending {
		ts.linesPending = slices.Clone(st.Frames)
	}
	finishStack(ts)
}

// walk unwinds the sample just taken. The frames alias the walker's buffer:
// valid until the next walk.
func (t *Target) walk() unwind.Stack {
	s := &t.sample
	if _, ok := t.space.Find(s.Regs.PC); !ok {
		// New code since the maps were read (dlopen, exec): reload once.
		t.refresh()
	}
	t.window = unwind.StackWindow{Base: s.StackAddr, Bytes: s.Stack, Fallback: t.mem}
	opts := unwind.Options{MaxDepth: t.opts.MaxDepth, NoCFI: t.opts.NoCFI, PACMask: t.pacMask,
		Unwinders: t.opts.Unwinders, FuncAt: t.funcAtFn, StackOf: t.stackOf}
	if sw := t.goStacks.switcher; sw != nil {
		opts.Switch = sw
	}
	if s.Regs.Arch == regs.S390X {
		// s390x has no usable frame-pointer chain: where SFrame and CFI
		// have no row, the back chain (-mbackchain code) is the fallback.
		opts.Fallback = t.backChain
	}
	if m, ok := t.space.MappingAt(s.Regs.SP()); ok {
		opts.Stack = unwind.StackBounds{Low: m.Start, High: m.End}
	}
	st := t.walker.Walk(s.Regs, &t.window, &t.mods, opts)
	t.goStacks.check(&st)
	return st
}
