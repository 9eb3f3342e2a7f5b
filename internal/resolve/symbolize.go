package resolve

import (
	"debug/elf"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/symbols"
	"codeberg.org/stacktop/stacktop/targetfile"
	"codeberg.org/stacktop/stacktop/unwind"
)

// SymbolOptions choose how much source detail symbolisation adds.
type SymbolOptions struct {
	NoInline bool // one frame per PC: inlined calls are not expanded
	NoLines  bool // no file:line, no inline frames: DWARF is not read
	// AsyncLines never waits for a module's line tables or for the unit
	// of DWARF a PC falls in: they load in the background, and
	// symbolizeFrames says the stack's lines are pending until then (the
	// periodic engine, whose ticks must not stall, names such stacks
	// again later; dump waits).
	AsyncLines bool
	// CacheDir keeps, from one run to the next, the decompressed DWARF
	// that lookups needed and each module's symbol table and function
	// names (see debuginfo.Cache); "" for none.
	CacheDir string
}

// symbolizeFrames names the frames of one stack, leaf first. With DWARF a
// PC can give several frames: the calls inlined at it (Inlined true,
// innermost first) then the function that contains it.
//
// A caller's PC is a return address, which can be the first byte after
// its function (a call to a noreturn function at the end): names and
// lines are looked up at PC-1, as gdb does, while the printed offset stays
// relative to PC.
//
// With opt.AsyncLines, pending reports that some frame's lines were not
// ready: the frames then lack file:line and inlined calls that a later
// call on the same frames will give.
func (r *Resolver) symbolizeFrames(frames []unwind.Frame, opt SymbolOptions) (out []profile.Frame, pending bool) {
	c := &r.named // the frames and tail calls named before
	if out, ok := c.stack(frames, opt); ok {
		return out, false
	}
	out = make([]profile.Frame, 0, len(frames)+len(frames)/2)
	for i, f := range frames {
		if i > 0 {
			out = c.appendTailCalls(out, r, frames[i-1], f, opt, &pending) // tailcall.go
		}
		out = c.appendFrames(out, r, f, opt, &pending)
	}
	return out, pending
}

func newSymbolizer() *symbolizer {
	return &symbolizer{mods: map[*modules.Module]*moduleSymbols{}}
}

// symbolizer caches, per module, its symbol table (merged with its debug
// file's), its DWARF line index and the source frames of the PCs seen.
type symbolizer struct {
	mu   sync.Mutex
	mods map[*modules.Module]*moduleSymbols
}

// close saves what each module's lines added to the DWARF cache and closes
// the debug files.
func (s *symbolizer) close() {
	s.mu.Lock()
	mods := s.mods
	s.mods = nil
	s.mu.Unlock()
	for m, ms := range mods {
		<-ms.loaded // (it sets debug; a symbol table is bounded work)
		// No line tables start from now on (a load that just ended
		// starts those asked for meanwhile). Those under way are not
		// waited for (see Resolver.Close).
		ms.linesOnce.Do(func() { close(ms.linesDone) })
		ms.saveCache()
		ms.saveLearned(m)
		if ms.debug != nil {
			ms.debug.Close()
		}
	}
}

// moduleSymbols is what one module offers for naming.
type moduleSymbols struct {
	// debug is set once located is closed, table once loaded is (load).
	located chan struct{}
	loaded  chan struct{}
	table   *symbols.Table
	debug   *debuginfo.DebugFile // nil without a separate debug file

	// The line tables are loaded once, on a goroutine of their own
	// (startLines); linesDone is closed when lines, gotab and linesErr
	// are set. prefetchOnce starts them ahead of need (prefetch).
	linesOnce    sync.Once
	linesStarted atomic.Bool
	linesDone    chan struct{}
	prefetchOnce sync.Once
	lines        *debuginfo.Lines   // nil without DWARF
	gotab        *debuginfo.GoTable // nil unless a Go program
	linesErr     error

	mu  sync.Mutex
	pcs map[uint64][]debuginfo.Frame // source frames by lookup address

	// What naming learned of this module's addresses in earlier runs
	// (learned.go): seen is read from the cache by load before located
	// is closed, and only read after; added (under mu) is what this run
	// found since, written back at close unless unsure. namesCache and
	// namesKey are where (nil and "" when not kept).
	namesCache *debuginfo.Cache
	namesKey   string
	seen       *learnedNames
	added      learnedNames
	unsure     atomic.Bool // a read of its DWARF failed: keep nothing
}

// maxCachedPCs bounds each module's PC cache; past it the cache restarts.
const maxCachedPCs = 1 << 16

// readiness grows whenever line tables or a unit of DWARF became ready
// in any module: stacks whose lines were pending need not be named again
// while it stays the same.
func (s *symbolizer) readiness() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, ms := range s.mods {
		if !ms.linesStarted.Load() {
			continue
		}
		select {
		case <-ms.linesDone:
			n++
			if ms.lines != nil {
				n += ms.lines.Decoded()
			}
		default:
		}
	}
	return n
}

// saveCache writes what this run added to the DWARF cache, if the lines
// are loaded (a load still running is not waited for).
func (ms *moduleSymbols) saveCache() {
	if !ms.linesStarted.Load() {
		return
	}
	select {
	case <-ms.linesDone:
		if ms.lines != nil {
			ms.lines.SaveCache() // a failed write costs the next run time only
		}
	default:
	}
}

// entry returns m's moduleSymbols, and whether this call made it (the
// caller must then load it).
func (s *symbolizer) entry(m *modules.Module) (ms *moduleSymbols, made bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ms, ok := s.mods[m]; ok {
		return ms, false
	}
	ms = &moduleSymbols{located: make(chan struct{}), loaded: make(chan struct{}), linesDone: make(chan struct{}),
		pcs: map[uint64][]debuginfo.Frame{}}
	if s.mods != nil { // (closed: the entry serves this call only)
		s.mods[m] = ms
	}
	return ms, true
}

// module returns m's symbols, loading them on first use or waiting for a
// load under way (prefetch).
func (s *symbolizer) module(r *Resolver, m *modules.Module) *moduleSymbols {
	ms, made := s.entry(m)
	if made {
		ms.load(r.PID, m, r.opts.Symbols.CacheDir)
	}
	<-ms.loaded
	return ms
}

// loadTable builds m's symbol table merged with its debug files' (extra:
// the separate debug file, then MiniDebugInfo's image), or reads it from
// the cache in cacheDir where it was built from the same files before
// (debuginfo.Cache, kind "symtab"); nil if m has no readable table.
func loadTable(m *modules.Module, debug *debuginfo.DebugFile, extra []*elf.File, cacheDir string) *symbols.Table {
	cache, key := objectCache(m, debug, cacheDir)
	if b, ok := cache.Load(m.BuildID, "symtab", key); ok {
		if tab, err := symbols.UnmarshalTable(b); err == nil {
			return tab
		}
	}
	// Only a table built from every file the key names is stored: a
	// read that failed (a corrupt file, or one a Close let go while this
	// ran in the background) would leave it short for every later run.
	whole := true
	if mini, err := debuginfo.MiniDebugInfo(m.File); err == nil {
		extra = append(extra, mini)
	} else if !errors.Is(err, debuginfo.ErrNoMiniDebugInfo) {
		whole = false
	}
	tab, err := symbols.LoadWithDebug(m.File, extra...)
	if err != nil && len(extra) > 0 {
		whole = false
		tab, err = symbols.Load(m.File)
	}
	if err != nil {
		return nil
	}
	if b, err := tab.AppendBinary(nil); err == nil && whole {
		cache.Store(m.BuildID, "symtab", key, b) // a failed write costs the next run time only
	}
	return tab
}

// loadFuncNames reads the function names of m and its debug file
// (symbols.FuncValues, for tail calls), or takes them from the cache
// (kind "funcs"). A corrupt symbol table adds no names; the others
// still count, and whole is false.
func loadFuncNames(m *modules.Module, debug *debuginfo.DebugFile, cacheDir string) (names *symbols.FuncNames, whole bool) {
	cache, key := objectCache(m, debug, cacheDir)
	if b, ok := cache.Load(m.BuildID, "funcs", key); ok {
		if names, err := symbols.UnmarshalFuncNames(b); err == nil {
			return names, true
		}
	}
	var debugELF *elf.File
	if debug != nil {
		debugELF = debug.File
	}
	values, err := symbols.FuncValues(m.File, debugELF)
	names = symbols.NewFuncNames(values)
	if err != nil {
		// A table that could not be read (corrupt, or a file Close let
		// go while this ran in the background): the names serve this
		// run, short, and are not kept for the next.
		return names, false
	}
	if b, err := names.AppendBinary(nil); err == nil {
		cache.Store(m.BuildID, "funcs", key, b)
	}
	return names, true
}

// objectCache is the cache that keeps what is built from m's symbol
// tables, and the key of m's entries; nil (no caching) without a cache
// directory or where tableKey gives no key.
func objectCache(m *modules.Module, debug *debuginfo.DebugFile, cacheDir string) (*debuginfo.Cache, string) {
	key, ok := tableKey(m, debug)
	if !ok || cacheDir == "" {
		return nil, ""
	}
	return &debuginfo.Cache{Dir: cacheDir}, key
}

// tableKey names what m's cached symbol tables are made from, for the
// cache: the rules (symbols.BuildVersion, toolVersions), the object's
// identity (device, inode, change time: no other file has them, and a
// write changes the time), its size and its MiniDebugInfo's, and the same
// of its debug file. A build ID alone is the file's own claim: a library
// that claims a victim's build ID, size and time would otherwise leave
// its names for later dumps of the victim. A module read from memory, or
// without a build ID, is not cached.
func tableKey(m *modules.Module, debug *debuginfo.DebugFile) (key string, ok bool) {
	if m.Source == procmaps.SourceImage || m.BuildID == "" || m.Key.Size == 0 {
		return "", false
	}
	k := m.Key
	key = fmt.Sprintf("symbols v%d; %s; object %d:%d %d %d %d", symbols.BuildVersion, toolVersions(), k.Dev, k.Ino, k.CtimeNS, k.Size, k.MtimeNS)
	if sec := m.File.Section(".gnu_debugdata"); sec != nil {
		key += fmt.Sprintf("; minidebuginfo %d", sec.FileSize)
	}
	if debug != nil {
		st := debug.Stat()
		key += fmt.Sprintf("; debug file %d:%d %d %d %d", st.Dev, st.Ino, st.Ctim.Nano(), st.Size, st.Mtim.Nano())
	}
	return key, true
}

// toolVersions names the code besides stacktop's own that decides what
// is cached: Go's (debug/elf, debug/dwarf) and the demangler's versions.
// A stacktop built with a newer one does not take the older one's tables
// and answers.
var toolVersions = sync.OnceValue(func() string {
	v := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/ianlancetaylor/demangle" {
				v += " demangle " + dep.Version
			}
		}
	}
	return v
})

// located returns m's symbols once its debug file is known (debug set):
// it starts m's load if none is under way, and does not wait for the
// symbol table.
func (s *symbolizer) located(r *Resolver, m *modules.Module) *moduleSymbols {
	ms, made := s.entry(m)
	if made {
		go ms.load(r.PID, m, r.opts.Symbols.CacheDir)
	}
	<-ms.located
	return ms
}

// prefetch starts loading m's symbols, and with lines its line tables, on
// goroutines of their own, and returns at once. Modules load in parallel:
// a dump's first stack names three or four (the program, libc, the
// dynamic linker), a few ms each, and its walks go on meanwhile. The line
// tables start once the debug file is known, beside the symbol table,
// unless earlier runs learned the module's answers (learned.go): those
// name the stacks seen before without them, and a PC not seen before
// starts them when it is named.
func (s *symbolizer) prefetch(r *Resolver, m *modules.Module, lines bool) {
	ms, made := s.entry(m)
	cacheDir := r.opts.Symbols.CacheDir
	if made {
		go ms.load(r.PID, m, cacheDir)
	}
	if !lines {
		return
	}
	ms.prefetchOnce.Do(func() {
		go func() {
			<-ms.located
			if ms.seen != nil {
				return
			}
			ms.startLines(m, cacheDir)
			if r.tails != nil {
				// Tail calls (tailcall.go) need the call sites, and
				// look callees up by name.
				s.startCallSites(r, m, cacheDir)
				s.startNames(r, m)
			}
		}()
	})
}

// load finds m's debug file (under the target's root first), reads what
// earlier runs learned of m, and builds its merged symbol table, then
// closes loaded. A prefetch starts the line tables as soon as the debug
// file is known (located), so the two loads overlap.
// Debug info that cannot be read costs names, never the frame.
func (ms *moduleSymbols) load(pid int, m *modules.Module, cacheDir string) {
	var located, loaded bool
	defer func() {
		// The parsers recover from bad input themselves; a panic that
		// still reaches here costs the module's names, not the program
		// (on a goroutine of its own it would end a dump before its
		// threads were let go), and no waiter hangs.
		if p := recover(); p != nil {
			ms.table = nil
		}
		if !located {
			close(ms.located)
		}
		if !loaded {
			close(ms.loaded)
		}
	}()
	var extra []*elf.File
	if m.Source != procmaps.SourceImage {
		loc := debuginfo.Locator{Root: procmaps.RootDir(pid), Reader: fileUser(pid),
			Object: debuginfo.FileID{Dev: m.Key.Dev, Ino: m.Key.Ino}}
		if df, err := loc.Find(m.Path, m.File, m.BuildID); err == nil {
			ms.debug = df
			extra = append(extra, df.File)
		}
	}
	ms.loadLearned(m, cacheDir)
	close(ms.located)
	located = true
	ms.table = loadTable(m, ms.debug, extra, cacheDir)
	close(ms.loaded)
	loaded = true
}

// fileUser is the user pid reads files as: debug files are opened for it
// only where it could read them itself. A process whose user cannot be
// read (it exited) gets nobody's: world-readable files of root or nobody.
func fileUser(pid int) *targetfile.User {
	if u, err := procmaps.FileUser(pid); err == nil {
		return u
	}
	return &targetfile.User{UID: math.MaxUint32, GID: math.MaxUint32}
}

// sourceFrames returns the cached source frames of vaddr, reading the
// module's DWARF (or pclntab) on first use.
//
// Reading the unit of DWARF that holds a PC takes milliseconds (most of it
// decompressing; see debuginfo.NewLines). With async, as the sampling
// engine asks, the index and the unit are read in the background and
// ready is false until they are, so a tick never waits for them; dump
// waits.
func (ms *moduleSymbols) sourceFrames(m *modules.Module, vaddr uint64, async bool, cacheDir string) (fr []debuginfo.Frame, ready bool) {
	if fr, ok := ms.seen.frame(vaddr); ok {
		return fr, true // no DWARF read: an earlier run's answer
	}
	ms.startLines(m, cacheDir)
	if async {
		select {
		case <-ms.linesDone:
		default:
			return nil, false
		}
	} else {
		<-ms.linesDone
	}
	return ms.framesAt(vaddr, async)
}

// startLines starts loading m's line tables once; linesDone is closed when
// they are ready (or known to be absent).
func (ms *moduleSymbols) startLines(m *modules.Module, cacheDir string) {
	ms.linesOnce.Do(func() {
		ms.linesStarted.Store(true)
		gate := linesGate
		go func() {
			defer close(ms.linesDone)
			if gate != nil {
				<-gate
			}
			dwarfFile := m.File
			if ms.debug != nil && ms.debug.File.Section(".debug_info") != nil {
				dwarfFile = ms.debug.File
			}
			var cache *debuginfo.Cache
			if cacheDir != "" {
				cache = &debuginfo.Cache{Dir: cacheDir}
			}
			ms.lines, ms.linesErr = debuginfo.NewLinesCached(dwarfFile, cache)
			if ms.lines == nil {
				ms.gotab, _ = debuginfo.NewGoTable(m.File)
			}
		}()
	})
}

// linesGate, when a test sets it, holds every module's line tables back
// until it is closed: lines that become ready late, on purpose.
var linesGate chan struct{}

// framesAt returns the cached source frames of vaddr, decoding its unit on
// first use (in the background with async: ready is then false until it
// is decoded). The line tables must be ready.
func (ms *moduleSymbols) framesAt(vaddr uint64, async bool) (fr []debuginfo.Frame, ready bool) {
	ms.mu.Lock()
	fr, ok := ms.pcs[vaddr]
	ms.mu.Unlock()
	if ok {
		return fr, true
	}
	var err error
	switch {
	case ms.lines != nil && async:
		if fr, ready, err = ms.lines.FramesNoWait(vaddr, nil); !ready {
			return nil, false
		}
	case ms.lines != nil:
		fr, err = ms.lines.Frames(vaddr, nil)
	case ms.gotab != nil:
		if f, ok := ms.gotab.Frame(vaddr); ok {
			fr = []debuginfo.Frame{f}
		}
	}
	ms.mu.Lock()
	if len(ms.pcs) >= maxCachedPCs {
		clear(ms.pcs)
	}
	ms.pcs[vaddr] = fr
	if err == nil && ms.lines != nil {
		// Only DWARF's answers: a Go program's pclntab answers come
		// with its table, which appendFrames also needs for the offset
		// of a function without a symbol, and cost little to give.
		ms.learnFrames(vaddr, fr)
	}
	ms.mu.Unlock()
	return fr, true
}

// appendFrames appends the frames of one unwound PC. It sets *pending if
// the PC's lines were not ready (opt.AsyncLines).
//
// Every string of a frame comes from the target (its symbol tables, its
// DWARF, its perf map, its mappings' paths), and a hostile one can hold
// terminal escape sequences: they are escaped here (\x1b), once, for every
// output (dump's text, top's screen, files a user may cat).
func (s *symbolizer) appendFrames(out []profile.Frame, r *Resolver, f unwind.Frame, opt SymbolOptions, pending *bool) []profile.Frame {
	n := len(out)
	out = s.appendNamedFrames(out, r, f, opt, pending)
	for i := n; i < len(out); i++ {
		fr := &out[i]
		fr.Function, fr.After = procmaps.EscapeControl(fr.Function), procmaps.EscapeControl(fr.After)
		fr.File, fr.Module = procmaps.EscapeControl(fr.File), procmaps.EscapeControl(fr.Module)
	}
	return out
}

// appendNamedFrames is appendFrames before the escaping.
func (s *symbolizer) appendNamedFrames(out []profile.Frame, r *Resolver, f unwind.Frame, opt SymbolOptions, pending *bool) []profile.Frame {
	base := profile.Frame{PC: f.PC, Method: f.Method.String()}
	em, ok := r.space.Find(f.PC)
	if !ok {
		return append(out, base)
	}
	base.Module = em.Path
	base.MapStart, base.MapLimit, base.MapOffset = em.Start, em.End, em.Offset
	if em.IsVDSO {
		base.Module = "[vdso]"
		if em.Module == nil && em.Err == nil {
			attachVDSO(r.space, r.mem) // on failure em.Err is set: tried once
		}
	}
	vaddr := f.PC - em.Bias
	base.Offset = vaddr
	if em.Module == nil {
		if base.Module == "" || em.IsVDSO {
			base.Offset = f.PC - em.Start
		}
		if base.Module == "" {
			r.perfMap.name(&base) // JIT code
		}
		return append(out, base)
	}
	base.BuildID = em.Module.BuildID
	lookup := vaddr
	if !f.Exact && lookup > 0 {
		lookup--
	}
	ms := s.module(r, em.Module)
	if ms.table != nil {
		if sym, ok := ms.table.Lookup(lookup); ok {
			base.Function, base.Offset = sym.Name, vaddr-sym.Start
		} else if sym, ok := ms.table.Preceding(lookup); ok {
			base.After = sym.Name
		}
	}
	if opt.NoLines {
		return append(out, base)
	}
	src, ready := ms.sourceFrames(em.Module, lookup, opt.AsyncLines, opt.CacheDir)
	if !ready {
		*pending = true
	}
	if len(src) == 0 {
		return append(out, base)
	}
	outer := src[len(src)-1]
	if !opt.NoInline {
		for _, sf := range src[:len(src)-1] {
			fr := base
			fr.Function, fr.Offset = sf.Function, 0
			fr.File, fr.Line, fr.Inlined = sf.File, sf.Line, true
			if fr.Function == "" {
				fr.Function = "??"
			}
			out = append(out, fr)
		}
	}
	if base.Function == "" && outer.Function != "" {
		// No symbol table entry (stripped Go binary, or DWARF-only
		// code): DWARF's or pclntab's name is better than module+off.
		base.Function = outer.Function
		if ms.gotab != nil {
			if _, entry, ok := ms.gotab.Func(lookup); ok {
				base.Offset = vaddr - entry
			}
		}
	}
	base.File, base.Line = outer.File, outer.Line
	return append(out, base)
}

// HoldLinesForTest holds every module's line tables back until gate is
// closed (nil: no gate), so that tests of the engine can make lines that
// become ready late, on purpose. Only tests call it.
func HoldLinesForTest(gate chan struct{}) { linesGate = gate }
