package resolve

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"codeberg.org/stacktop/stacktop/backchain"
	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// Options tune a Resolver.
type Options struct {
	MaxDepth int // frames per stack; 0 means unwind.DefaultMaxDepth
	Symbols  SymbolOptions
	NoCFI    bool // unwind with SFrame and frame pointers only
	// Unwinders is the ordered list of unwinding methods walks may use
	// (--unwinder); nil means the architecture's default. See
	// unwind.Options.Unwinders.
	Unwinders []unwind.Method
	// PACMask is cleared from arm64 return addresses: the bits of a
	// pointer-authentication code, per process (ptrace's NT_ARM_PAC_MASK,
	// which a back end that attached can read). 0 strips nothing.
	PACMask uint64
}

// Stack is one sample's named stack.
type Stack struct {
	Frames   []profile.Frame
	Complete bool  // the walk reached the outermost frame
	Err      error // why the walk stopped early (Complete false)
	// Pending holds the walk's frames when some frame's lines were not
	// ready (SymbolOptions.AsyncLines): Frames then say less than they
	// will, and Rename names the walk again once they are.
	Pending []unwind.Frame
}

// Resolver turns the samples of one process into named stacks. It owns
// what naming and unwinding need of the process: its address space, the
// module index and unwind tables, the vDSO image, the DWARF call sites,
// the Go runtime's stack layout and the perf map of JIT code. A Resolver
// is used from one goroutine at a time.
type Resolver struct {
	PID   int
	Arch  regs.Arch
	mem   unwind.Memory
	cache *modules.ModuleCache
	space *modules.AddressSpace
	mods  moduleIndex
	syms  *symbolizer
	// pacMask is cleared from arm64 return addresses (0: nothing to strip).
	pacMask   uint64
	backChain backchain.Unwinder // s390x fallback; reads r.mods at call time
	opts      Options
	tails     *tailCalls // DWARF call sites per module (tailcall.go)
	goStacks  goStacks   // Go's systemstack/morestack switches (gostack.go)
	// funcAtFn is r.funcAt bound once, so a walk does not allocate it.
	funcAtFn func(pc uint64) (start, end uint64, ok bool)

	// stackOf bounds frames a signal interrupted on another stack than
	// the handler's (sigaltstack) by their own mapping; reads r.space at
	// call time.
	stackOf unwind.StackFinder
	perfMap perfMap // names of JIT code (anonymous executable memory)
	// named keeps the frames named so far in this address space.
	named nameCache

	walker unwind.Walker
	window unwind.StackWindow
	// stackRefreshed is when a walk last read the maps again for a stack
	// pointer on no known mapping (stackRefreshGap).
	stackRefreshed time.Time
	// codeUnchanged is when a walk that left the known code last found the
	// maps unchanged (codeRefreshGap).
	codeUnchanged time.Time
}

// stackRefreshGap is how often, at most, a walk whose stack pointer lies
// on no mapping the resolver knows reads the maps again: a thread created
// after they were read runs on a stack mapped since, and without its
// bounds the walk can tell the back end nothing of what it needed of it
// (s.StackUse, from which the ptrace back end learns a thread's copy).
const stackRefreshGap = time.Second

// codeRefreshGap is how often, at most, a walk that reaches a return
// address in no known mapping reads the maps again and finds them
// unchanged. New code is found at once (a read that finds a change does
// not count), while a garbage return address, which no read can explain,
// costs one read of the maps per gap, not one per sample.
const codeRefreshGap = time.Second

// codeMapped reads the maps again for a walk that reached a return
// address in no known mapping, and reports whether they changed.
func (r *Resolver) codeMapped() bool {
	if time.Since(r.codeUnchanged) < codeRefreshGap {
		return false
	}
	old := r.space
	if r.refresh() != nil || r.space == old {
		r.codeUnchanged = time.Now()
		return false
	}
	return true
}

// New loads the address space of pid. mem reads the process's memory
// (frames beyond a sample's stack copy, the vDSO image); it stays the
// caller's, as does cache, which may be shared between resolvers (the same
// libraries are opened once). A 32-bit program is the caller's to refuse,
// with CheckClass, before a back end attaches to it: then nothing needs
// undoing.
func New(pid int, mem unwind.Memory, cache *modules.ModuleCache, opts Options) (*Resolver, error) {
	r := &Resolver{PID: pid, mem: mem, cache: cache, opts: opts, syms: newSymbolizer(),
		perfMap: perfMap{pid: pid}, pacMask: opts.PACMask}
	if err := r.refresh(); err != nil {
		return nil, fmt.Errorf("reading the address space of %d: %w", pid, err)
	}
	r.Arch = r.arch()
	if err := r.checkUnwinders(); err != nil {
		return nil, err
	}
	r.funcAtFn = r.funcAt
	r.tails = &tailCalls{}
	r.stackOf = func(sp uint64) (unwind.StackBounds, bool) {
		m, ok := r.space.MappingAt(sp)
		return unwind.StackBounds{Low: m.Start, High: m.End}, ok
	}
	r.backChain = backchain.Unwinder{
		InVDSO: func(pc uint64) bool { m, ok := r.mods.ModuleAt(pc); return ok && m.IsVDSO },
		IsCode: func(pc uint64) bool { _, ok := r.mods.ModuleAt(pc); return ok },
		FuncAt: r.funcAtFn,
	}
	return r, nil
}

// Mappings are the process's mappings, as last read (ascending).
func (r *Resolver) Mappings() []procmaps.Mapping { return r.space.Mappings }

// SetPACMask sets the pointer-authentication mask stripped from arm64
// return addresses (Options.PACMask), for a resolver made before the
// process was attached.
func (r *Resolver) SetPACMask(mask uint64) { r.pacMask = mask }

// arch is the target's architecture, from its objects' ELF headers (all
// objects of one process share it), so an s390x snapshot unwinds the
// same on any host.
func (r *Resolver) arch() regs.Arch {
	for i := range r.space.Exec {
		if m := r.space.Exec[i].Module; m != nil && m.Arch != regs.ArchUnknown {
			return m.Arch
		}
	}
	return regs.ArchUnknown
}

// Close saves what this run added to the DWARF cache and releases the
// debug files. It does not wait for line tables, call sites or function
// names still loading in the background (the engine's Run must end in
// bounded time whatever the DWARF costs): their reads of a closed file
// fail (os.File knows it is closed and keeps its descriptor until reads
// under way return), and their results go unused. It is safe to call more
// than once, not while a walk or naming runs; a Resolver is not used after
// it.
func (r *Resolver) Close() error {
	r.syms.close()
	return nil
}

// refresh reloads /proc/PID/maps (cheaply: an unchanged file keeps the old
// snapshot) and rebuilds the module index the unwinder searches.
func (r *Resolver) refresh() error {
	var (
		space *modules.AddressSpace
		err   error
	)
	if r.space == nil {
		space, err = modules.LoadAddressSpace(r.PID, r.cache)
	} else {
		space, err = r.space.Refresh()
	}
	if err != nil {
		return err
	}
	if space != r.space {
		// The vDSO has no file: its image comes from the target's memory,
		// so its symbols and unwind tables are there for the unwinder.
		attachVDSO(space, r.mem)
		r.space = space
		r.named.reset() // a PC may be in another module now
		r.mods = newModuleIndex(space)
		r.goStacks.update(space)
	}
	return nil
}

// Reload drops the address space and reads it again from scratch: after an
// execve (backend.Round.Exec) every mapping, module and symbol table of
// the old image is stale.
func (r *Resolver) Reload() error {
	r.space = nil
	r.named.reset()                 // even if the new image cannot be read
	r.perfMap = perfMap{pid: r.PID} // the new program writes its own
	if err := r.refresh(); err != nil {
		return err
	}
	r.Arch = r.arch()
	return nil
}

// Resolve walks and names the stack of s. s's bytes are not kept: the
// result stays valid after the back end reuses them.
func (r *Resolver) Resolve(s *backend.Sample) Stack {
	return r.Name(r.Walk(s))
}

// Walk unwinds s without naming its frames: a dump walks every thread
// while it samples and names them after, so that loading symbols and
// debug info does not hold up the sampling. The frames alias the
// Resolver's buffer: valid until the next walk. Walk sets s.StackUse:
// how far up the walk read the thread's stack, and how often beyond the
// copy (from the live process).
func (r *Resolver) Walk(s *backend.Sample) unwind.Stack {
	if _, ok := r.space.Find(s.Regs.PC); !ok || s.MapsChanged {
		// New code since the maps were read (dlopen, exec), found here
		// or announced by the back end (perf's mapping records): read
		// the maps again (an unchanged file keeps the snapshot).
		r.refresh()
	}
	r.window = unwind.StackWindow{Base: s.StackAddr, Bytes: s.Stack, Fallback: r.mem}
	opts := unwind.Options{MaxDepth: r.opts.MaxDepth, NoCFI: r.opts.NoCFI, PACMask: r.pacMask,
		Unwinders: r.opts.Unwinders, FuncAt: r.funcAtFn, StackOf: r.stackOf}
	if sw := r.goStacks.switcher; sw != nil {
		opts.Switch = sw
	}
	if s.Regs.Arch == regs.S390X {
		// s390x has no usable frame-pointer chain: where SFrame and CFI
		// have no row, the back chain (-mbackchain code) is the fallback.
		opts.Fallback = r.backChain
	}
	m, ok := r.space.MappingAt(s.Regs.SP())
	if !ok && time.Since(r.stackRefreshed) >= stackRefreshGap {
		r.stackRefreshed = time.Now()
		r.refresh()
		m, ok = r.space.MappingAt(s.Regs.SP())
	}
	if ok {
		opts.Stack = unwind.StackBounds{Low: m.Start, High: m.End}
		r.window.StackEnd = m.End // what the walk reads of it: s.StackUse
	}
	st := r.walker.Walk(s.Regs, &r.window, &r.mods, opts)
	if errors.Is(st.Err, unwind.ErrNoModule) && r.codeMapped() {
		// A caller in code mapped since the maps were read (the C
		// library, while the dynamic loader maps it at a program's
		// start): walk again with it.
		r.window = unwind.StackWindow{Base: s.StackAddr, Bytes: s.Stack, Fallback: r.mem, StackEnd: r.window.StackEnd}
		st = r.walker.Walk(s.Regs, &r.window, &r.mods, opts)
	}
	r.goStacks.check(&st)
	if s.LateStop {
		st.Frames = r.wrapperCaller(st.Frames)
	}
	s.StackUse = backend.StackUse{End: r.window.Reached, Missed: r.window.Missed}
	return st
}

// Name names the frames of a walk (Walk's, copied if another walk ran
// since), as Resolve would have.
func (r *Resolver) Name(st unwind.Stack) Stack {
	out := Stack{Complete: st.Complete, Err: st.Err}
	var pending bool
	out.Frames, pending = r.symbolizeFrames(st.Frames, r.opts.Symbols)
	if pending {
		out.Pending = slices.Clone(st.Frames)
	}
	finishStack(&out)
	return out
}

// Rename names again a walk whose lines were pending (Stack.Pending),
// without waiting for any. ok is false while some are still not ready.
// The frames are the ones Resolve gives once they are: a stack does not
// depend on when it was sampled. Completeness was decided at the sample,
// by the same symbol names.
func (r *Resolver) Rename(walk []unwind.Frame) (frames []profile.Frame, ok bool) {
	opts := r.opts.Symbols
	opts.AsyncLines = true
	frames, pending := r.symbolizeFrames(walk, opts)
	if pending {
		return nil, false
	}
	// As at the sample: signal trampolines named, a Go stack cut at its
	// root.
	st := Stack{Frames: frames}
	finishStack(&st)
	return st.Frames, true
}

// Readiness grows whenever line tables, a unit of DWARF or call sites
// became ready: pending walks need not be renamed while it stays the same.
func (r *Resolver) Readiness() int64 {
	return r.syms.readiness() + r.tails.readiness()
}

// wrapperCaller drops the frames of a late stop's walk that belong to the
// system call's wrapper (backend.Sample.LateStop): the stop landed at the
// call's exit, but the thread was in the wrapper's caller when it was
// asked to stop. The wrapper is the leaf function, the one that made the
// call (libc's write, Go's syscall.Syscall6, the vDSO's fallback), and,
// when that is in the vDSO, the C library's function that called it
// (clock_gettime). The caller's frame is a return address, so it is named
// at its call site. A walk of one frame stays whole.
func (r *Resolver) wrapperCaller(frames []unwind.Frame) []unwind.Frame {
	if len(frames) < 2 {
		return frames
	}
	leaf, ok := r.space.Find(frames[0].PC)
	if ok && leaf.IsVDSO && len(frames) > 2 {
		if em, ok := r.space.Find(frames[1].PC - 1); ok && isCLibrary(em.Path) {
			return frames[2:]
		}
	}
	return frames[1:]
}
