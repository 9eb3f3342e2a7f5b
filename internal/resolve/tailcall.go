package resolve

import (
	"sync"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/symbols"
	"codeberg.org/stacktop/stacktop/unwind"
)

// Tail-call frames. A function that ends in a jump to another leaves no
// return address: the unwound stack goes from the callee straight to the
// caller of the function that jumped. gdb puts the missing functions back
// from DWARF call-site information where the chain is unambiguous, and so
// does this file: between each unwound callee and its caller, the call
// site at the caller's return address names the function it called; when
// that is not the callee's function, the tail calls recorded in DWARF
// lead from it to the callee, and the functions along the one chain that
// does are shown as frames of their own, with method "tailcall" and the
// address after their jump as PC (as gdb prints them).
//
// It needs DWARF (the module's or its separate debug file's), so
// SymbolOptions.NoLines turns it off. The call sites of a module are read
// once, in the background under AsyncLines (until then the stack is
// pending, like one whose lines are not ready: see symbolizeFrames) and
// synchronously for dump. When the line index reads units one by one, so
// do the call sites: a unit's are read at the first stack that needs them
// (in the background under AsyncLines, the stack pending until then).

// tailCalls caches each module's call sites and, for callees in other
// modules, its symbol names.
type tailCalls struct {
	mu   sync.Mutex
	mods map[*modules.Module]*moduleCallSites
}

type moduleCallSites struct {
	once  sync.Once
	done  chan struct{}
	sites *debuginfo.CallSites // nil without DWARF

	namesOnce sync.Once
	namesDone chan struct{}
	names     *symbols.FuncNames // ELF symbol name -> value, for callees named by declarations

	// chains caches TailChain's answer per (caller's return address,
	// callee's function entry), both ELF addresses of their modules.
	mu     sync.Mutex
	chains map[[2]uint64][]debuginfo.TailCallFrame
}

// maxCachedChains bounds a module's chain cache; past it the cache restarts.
const maxCachedChains = 1 << 14

func (tc *tailCalls) module(m *modules.Module) *moduleCallSites {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.mods == nil {
		tc.mods = map[*modules.Module]*moduleCallSites{}
	}
	mc, ok := tc.mods[m]
	if !ok {
		mc = &moduleCallSites{done: make(chan struct{}), namesDone: make(chan struct{})}
		tc.mods[m] = mc
	}
	return mc
}

// callSites returns m's call sites, loading them on first use (in the
// background when async: nil until ready).
func (s *symbolizer) callSites(r *Resolver, m *modules.Module, opt SymbolOptions) (sites *debuginfo.CallSites, ready bool) {
	mc := s.startCallSites(r, m, opt.CacheDir)
	if opt.AsyncLines {
		select {
		case <-mc.done:
		default:
			return nil, false
		}
	} else {
		<-mc.done
	}
	return mc.sites, true
}

// symbolValue is the ELF value of the function named name in m (its
// dynamic and static symbols, and its debug file's), 0 if none. The names
// are read once, in the background when async: loaded is false until
// they are.
func (s *symbolizer) symbolValue(r *Resolver, m *modules.Module, name string, async bool) (v uint64, loaded bool) {
	mc := s.startNames(r, m)
	if async {
		select {
		case <-mc.namesDone:
		default:
			return 0, false
		}
	} else {
		<-mc.namesDone
	}
	v, _ = mc.names.Value(name)
	return v, true
}

// startCallSites starts reading m's call sites on a goroutine of its own,
// once, from its line tables' DWARF (started too if need be).
func (s *symbolizer) startCallSites(r *Resolver, m *modules.Module, cacheDir string) *moduleCallSites {
	mc := r.tails.module(m)
	mc.once.Do(func() {
		go func() {
			defer close(mc.done)
			defer func() {
				if recover() != nil { // (see load)
					mc.sites = nil
				}
			}()
			ms := s.located(r, m) // (the line tables read the debug file)
			ms.startLines(m, cacheDir)
			// The line tables' DWARF, decompressed once for both.
			<-ms.linesDone
			if ms.lines == nil {
				return
			}
			cs, err := debuginfo.NewCallSitesFromLines(ms.lines)
			if cs != nil && (err == nil || cs.Len() > 0) {
				mc.sites = cs
			}
			if err != nil {
				ms.unsure.Store(true) // some call sites are missing
			}
		}()
	})
	return mc
}

// startNames starts reading m's function names (symbolValue) on a
// goroutine of its own, once; it needs m's debug file, not its symbol
// table, so the two load side by side.
func (s *symbolizer) startNames(r *Resolver, m *modules.Module) *moduleCallSites {
	mc := r.tails.module(m)
	mc.namesOnce.Do(func() {
		go func() {
			defer close(mc.namesDone)
			ms := s.located(r, m)
			whole := false
			defer func() {
				if recover() != nil { // (see load)
					mc.names = nil
				}
				if !whole {
					ms.unsure.Store(true) // a chain found with short names may be wrong
				}
			}()
			mc.names, whole = loadFuncNames(m, ms.debug, r.opts.Symbols.CacheDir)
		}()
	})
	return mc
}

// appendTailCalls appends the frames that tail calls removed between
// callee and its caller (innermost first), named like any other frame.
// appendTailCalls sets *pending if the call sites or the symbol names it
// needs are still loading (AsyncLines): the answer may change once they are.
func (s *symbolizer) appendTailCalls(out []profile.Frame, r *Resolver, callee, caller unwind.Frame, opt SymbolOptions, pending *bool) []profile.Frame {
	if opt.NoLines || caller.Exact || r.tails == nil {
		return out
	}
	em, ok := r.space.Find(caller.PC - 1)
	if !ok || em.Module == nil || caller.PC < em.Bias {
		return out
	}
	// The callee's function: its entry in its own module.
	lookup := callee.PC
	if !callee.Exact {
		lookup--
	}
	cem, ok := r.space.Find(lookup)
	if !ok || cem.Module == nil {
		return out
	}
	cms := s.module(r, cem.Module)
	if cms.table == nil {
		return out
	}
	sym, ok := cms.table.Lookup(lookup - cem.Bias)
	if !ok {
		return out
	}
	// An earlier run's answer, if it looked at the same question (the
	// same module's files, and the callee's if it is in another).
	ms := s.located(r, em.Module)
	learn := chainKey{caller: caller.PC - em.Bias, callee: sym.Start}
	if cem.Module != em.Module {
		learn.calleeModule = cms.namesHash(cem.Module)
	}
	learnable := cem.Module == em.Module || learn.calleeModule != 0
	if chain, ok := ms.seen.chain(learn); ok && learnable {
		return s.appendChain(out, r, em.Bias, caller, chain, opt, pending)
	}
	cs, ready := s.callSites(r, em.Module, opt)
	if !ready {
		*pending = true
		return out
	}
	if cs == nil {
		return out
	}
	var site debuginfo.CallSite
	if opt.AsyncLines {
		// A lazy index reads the call's unit in the background.
		site, ok, ready = cs.AtNoWait(caller.PC - em.Bias)
		if !ready {
			*pending = true
			return out
		}
	} else {
		site, ok = cs.At(caller.PC - em.Bias)
	}
	if !ok {
		if learnable {
			ms.learnChain(learn, nil) // no call site here: no tail calls
		}
		return out
	}
	mc := r.tails.module(em.Module)
	key := [2]uint64{caller.PC - em.Bias, sym.Start}
	if cem.Module != em.Module {
		key[1] = ^sym.Start // another module's address: keep the keys apart
	}
	mc.mu.Lock()
	chain, cached := mc.chains[key]
	mc.mu.Unlock()
	ready = true // now: whether the names this answer needs are read
	if !cached {
		isCallee := func(entry uint64, name string) bool {
			if entry != 0 {
				return cem.Module == em.Module && entry == sym.Start
			}
			if name == "" {
				return false
			}
			v, loaded := s.symbolValue(r, cem.Module, name, opt.AsyncLines)
			ready = ready && loaded
			return loaded && v == sym.Start
		}
		resolve := func(name string) uint64 {
			v, loaded := s.symbolValue(r, em.Module, name, opt.AsyncLines)
			ready = ready && loaded
			return v
		}
		var sitesReady bool
		chain, sitesReady = tailChain(cs, site, resolve, isCallee, opt.AsyncLines)
		ready = ready && sitesReady
		if !ready && len(chain) == 0 {
			*pending = true
		}
		if ready || len(chain) > 0 {
			// An answer given before the names were read is not kept.
			mc.mu.Lock()
			if mc.chains == nil || len(mc.chains) >= maxCachedChains {
				mc.chains = map[[2]uint64][]debuginfo.TailCallFrame{}
			}
			mc.chains[key] = chain
			mc.mu.Unlock()
		}
	}
	if len(chain) == 0 && cem.Module != em.Module && site.Target == 0 && site.TargetName != "" {
		// The call went to another module, through the PLT: the tail
		// calls after it are in that module's call sites. Neither
		// cached nor learned as this module's answer (its addresses are
		// the other module's), so it is asked again at each stack.
		cross, crossReady := s.crossModuleChain(r, cem.Module, sym.Start, site.TargetName, opt)
		switch {
		case len(cross) > 0:
			return s.appendChain(out, r, cem.Bias, caller, cross, opt, pending)
		case !crossReady:
			*pending = true
			return out
		}
	}
	if !cached && ready && learnable && !cms.unsure.Load() {
		// (The callee's module's names decided it too: short ones,
		// after a failed read, make it unsure.)
		ms.learnChain(learn, chain)
	}
	return s.appendChain(out, r, em.Bias, caller, chain, opt, pending)
}

// crossModuleChain finds the tail calls between a function called through
// the PLT, named target in the caller's call site, and the callee at entry
// calleeStart, both in module m: the call's target is looked up in m's
// symbols (sem_wait is libc's __new_sem_wait), and the chain from it to
// the callee in m's call sites (__new_sem_wait jumps to
// __new_sem_wait_slow64). The chain's addresses are m's. ready is false
// while m's names or call sites are still loading (AsyncLines).
func (s *symbolizer) crossModuleChain(r *Resolver, m *modules.Module, calleeStart uint64, target string, opt SymbolOptions) (chain []debuginfo.TailCallFrame, ready bool) {
	first, loaded := s.symbolValue(r, m, target, opt.AsyncLines)
	if !loaded {
		return nil, false
	}
	if first == 0 || first == calleeStart {
		return nil, true // not m's, or a direct call of the callee
	}
	cs, sitesReady := s.callSites(r, m, opt)
	if !sitesReady {
		return nil, false
	}
	if cs == nil {
		return nil, true
	}
	ready = true
	value := func(name string) uint64 {
		v, loaded := s.symbolValue(r, m, name, opt.AsyncLines)
		ready = ready && loaded
		return v
	}
	isCallee := func(entry uint64, name string) bool {
		if entry == 0 && name != "" {
			entry = value(name)
		}
		return entry == calleeStart
	}
	chain, unitsRead := tailChain(cs, debuginfo.CallSite{Target: first}, value, isCallee, opt.AsyncLines)
	return chain, ready && unitsRead
}

// tailChain asks cs for the tail-call chain after site: without waiting
// for a unit not read yet when async (ready is false then, and the unit is
// being read), waiting for it otherwise.
func tailChain(cs *debuginfo.CallSites, site debuginfo.CallSite, resolve func(string) uint64, isCallee func(uint64, string) bool, async bool) (chain []debuginfo.TailCallFrame, ready bool) {
	if async {
		return cs.TailChainNoWait(site, resolve, isCallee)
	}
	return cs.TailChain(site, resolve, isCallee), true
}

// appendChain appends the frames of a tail-call chain found between a
// callee and caller, caller in a module loaded at bias.
func (s *symbolizer) appendChain(out []profile.Frame, r *Resolver, bias uint64, caller unwind.Frame, chain []debuginfo.TailCallFrame, opt SymbolOptions, pending *bool) []profile.Frame {
	for _, tf := range chain {
		f := unwind.Frame{PC: tf.ReturnPC + bias, SP: caller.SP, Method: unwind.MethodTailCall}
		out = s.appendFrames(out, r, f, opt, pending)
	}
	return out
}

// readiness counts the modules whose call sites are read and the units
// read by lazy ones: resolveLate names pending stacks again only when this
// or the lines' readiness moved.
func (tc *tailCalls) readiness() int64 {
	if tc == nil {
		return 0
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var n int64
	for _, mc := range tc.mods {
		select {
		case <-mc.done:
			n++
			if mc.sites != nil {
				n += mc.sites.Decoded()
			}
		default:
		}
	}
	return n
}
