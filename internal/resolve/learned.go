package resolve

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/internal/modules"
)

// learnedNames is what naming found out about one module's addresses: the
// source frames (file:line and inlined calls) of each PC it looked up, and
// the tail-call chain between each caller and callee it looked at. Both
// come from DWARF units that take milliseconds each to decode (libc's
// pthread_cond_wait unit alone is most of a 1,000-thread dump's naming),
// and both depend only on the module's files, so they are kept from one
// run to the next in the cache (kind "names", beside the symbol table;
// see moduleSymbols.loadLearned): a later dump of threads in the same
// places decodes no unit at all.
type learnedNames struct {
	frames map[uint64][]debuginfo.Frame // by lookup address (ELF vaddr)
	chains map[chainKey][]debuginfo.TailCallFrame
}

// chainKey is a tail-call question: the caller's return address (an ELF
// address of this module), the entry of the callee's function, and which
// module that entry is in: 0 for this one, else a hash of the other
// module's names key (its build ID and files), so an answer that depends
// on another module's symbols is only found again with that same module.
type chainKey struct {
	caller, callee, calleeModule uint64
}

// Bounds of what one module keeps: a run adds to what it read, up to
// these, and then keeps what it read and adds nothing.
const (
	maxLearnedPCs    = 1 << 14
	maxLearnedChains = 1 << 13
	// maxFramesPerPC and maxChainLen bound an entry as decoding
	// checks it: a PC's inline chain stops at 16 scopes
	// (debuginfo.Lines.framesIn), a tail chain at 8 links.
	maxFramesPerPC = 64
	maxChainLen    = 64
)

func (ln *learnedNames) len() int { return len(ln.frames) + len(ln.chains) }

// merged returns ln with add's entries that fit under the bounds; ln and
// add are not changed.
func (ln *learnedNames) merged(add *learnedNames) *learnedNames {
	out := &learnedNames{frames: maps.Clone(ln.frames), chains: maps.Clone(ln.chains)}
	if out.frames == nil {
		out.frames = map[uint64][]debuginfo.Frame{}
	}
	if out.chains == nil {
		out.chains = map[chainKey][]debuginfo.TailCallFrame{}
	}
	for pc, fr := range add.frames {
		if len(out.frames) >= maxLearnedPCs {
			break
		}
		out.frames[pc] = fr
	}
	for k, c := range add.chains {
		if len(out.chains) >= maxLearnedChains {
			break
		}
		out.chains[k] = c
	}
	return out
}

// appendBinary appends ln's binary form: a table of the distinct strings,
// then the frames by ascending PC (each PC as its distance from the one
// before), then the chains; every number an unsigned varint.
func (ln *learnedNames) appendBinary(b []byte) []byte {
	index := map[string]uint64{}
	var strs []string
	str := func(s string) uint64 {
		i, ok := index[s]
		if !ok {
			i = uint64(len(strs))
			index[s] = i
			strs = append(strs, s)
		}
		return i
	}
	pcs := slices.Sorted(maps.Keys(ln.frames))
	for _, pc := range pcs {
		for _, f := range ln.frames[pc] {
			str(f.Function)
			str(f.File)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(strs)))
	for _, s := range strs {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(pcs)))
	prev := uint64(0)
	for _, pc := range pcs {
		fr := ln.frames[pc]
		b = binary.AppendUvarint(b, pc-prev)
		prev = pc
		b = binary.AppendUvarint(b, uint64(len(fr)))
		for _, f := range fr {
			b = binary.AppendUvarint(b, index[f.Function])
			b = binary.AppendUvarint(b, index[f.File])
			b = binary.AppendUvarint(b, uint64(f.Line))
			inlined := byte(0)
			if f.Inlined {
				inlined = 1
			}
			b = append(b, inlined)
		}
	}
	keys := slices.SortedFunc(maps.Keys(ln.chains), func(x, y chainKey) int {
		if c := cmpUint(x.caller, y.caller); c != 0 {
			return c
		}
		if c := cmpUint(x.callee, y.callee); c != 0 {
			return c
		}
		return cmpUint(x.calleeModule, y.calleeModule)
	})
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, k.caller)
		b = binary.AppendUvarint(b, k.callee)
		b = binary.AppendUvarint(b, k.calleeModule)
		c := ln.chains[k]
		b = binary.AppendUvarint(b, uint64(len(c)))
		for _, tf := range c {
			b = binary.AppendUvarint(b, tf.Func)
			b = binary.AppendUvarint(b, tf.ReturnPC)
		}
	}
	return b
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LearnedFormatError is why a cached "names" payload was refused: what
// rule broke, at which byte offset.
type LearnedFormatError struct {
	Offset int
	Msg    string
}

func (e *LearnedFormatError) Error() string {
	return fmt.Sprintf("resolve: learned names at offset %d: %s", e.Offset, e.Msg)
}

// learnedReader reads varints with a sticky error: after the first
// problem every read returns 0 and the error stays the first one.
type learnedReader struct {
	b   []byte
	off int
	err error
}

func (r *learnedReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &LearnedFormatError{Offset: r.off, Msg: fmt.Sprintf(format, args...)}
	}
}

func (r *learnedReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("%s: truncated or overlong varint", what)
		return 0
	}
	r.off += n
	return v
}

// count reads a number of entries that each take at least min bytes, so
// that a corrupt count cannot make a huge allocation.
func (r *learnedReader) count(what string, min, max int) int {
	n := r.uvarint(what)
	if r.err == nil && (n > uint64(max) || n > uint64(len(r.b)-r.off)/uint64(min)) {
		r.fail("%s %d: more than the bound %d or than the bytes left", what, n, max)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *learnedReader) bytes(n uint64, what string) []byte {
	if r.err == nil && n > uint64(len(r.b)-r.off) {
		r.fail("%s of %d bytes: past the end", what, n)
	}
	if r.err != nil {
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

// unmarshalLearned decodes appendBinary's form. Every count, string index
// and bound is checked, PCs must ascend and the input must end with the
// last chain; an error is a *LearnedFormatError.
func unmarshalLearned(b []byte) (*learnedNames, error) {
	r := &learnedReader{b: b}
	strs := make([]string, r.count("strings", 1, len(b)))
	for i := range strs {
		strs[i] = string(r.bytes(r.uvarint("string length"), "string"))
	}
	str := func(what string) string {
		i := r.uvarint(what)
		if r.err == nil && i >= uint64(len(strs)) {
			r.fail("%s %d: not below the %d strings", what, i, len(strs))
		}
		if r.err != nil {
			return ""
		}
		return strs[i]
	}
	ln := &learnedNames{frames: map[uint64][]debuginfo.Frame{}, chains: map[chainKey][]debuginfo.TailCallFrame{}}
	npcs := r.count("PCs", 2, maxLearnedPCs)
	pc := uint64(0)
	for i := 0; i < npcs && r.err == nil; i++ {
		d := r.uvarint("PC distance")
		if i > 0 && d == 0 || pc+d < pc {
			r.fail("PC %d: distance %#x does not ascend from %#x", i, d, pc)
		}
		pc += d
		fr := make([]debuginfo.Frame, r.count("frames", 4, maxFramesPerPC))
		for j := range fr {
			fr[j].Function = str("function")
			fr[j].File = str("file")
			line := r.uvarint("line")
			if line > 1<<31-1 {
				r.fail("line %d: too large", line)
			}
			fr[j].Line = int(line)
			switch inl := r.bytes(1, "inlined flag"); {
			case inl == nil:
			case inl[0] > 1:
				r.fail("inlined flag %d: not 0 or 1", inl[0])
			default:
				fr[j].Inlined = inl[0] == 1
			}
		}
		ln.frames[pc] = fr
	}
	nchains := r.count("chains", 4, maxLearnedChains)
	for i := 0; i < nchains && r.err == nil; i++ {
		k := chainKey{caller: r.uvarint("caller"), callee: r.uvarint("callee"), calleeModule: r.uvarint("callee module")}
		if _, dup := ln.chains[k]; dup && r.err == nil {
			r.fail("chain %d: its key is given twice", i)
		}
		c := make([]debuginfo.TailCallFrame, r.count("chain links", 2, maxChainLen))
		for j := range c {
			c[j] = debuginfo.TailCallFrame{Func: r.uvarint("link function"), ReturnPC: r.uvarint("link return address")}
		}
		ln.chains[k] = c
	}
	if r.err == nil && r.off != len(b) {
		r.fail("%d bytes past the last chain", len(b)-r.off)
	}
	if r.err != nil {
		return nil, r.err
	}
	return ln, nil
}

// learnedVersion is the version of learnedNames' binary form and of the
// rules that decide what is learned; with debuginfo.AnswersVersion it is
// part of the cache key.
const learnedVersion = 2 // 2: tail chains through the PLT into another module are not learned

// frame returns the source frames an earlier run found at vaddr (nil ln:
// none).
func (ln *learnedNames) frame(vaddr uint64) ([]debuginfo.Frame, bool) {
	if ln == nil {
		return nil, false
	}
	fr, ok := ln.frames[vaddr]
	return fr, ok
}

// chain returns the tail-call chain an earlier run found for k.
func (ln *learnedNames) chain(k chainKey) ([]debuginfo.TailCallFrame, bool) {
	if ln == nil {
		return nil, false
	}
	c, ok := ln.chains[k]
	return c, ok
}

// loadLearned reads what earlier runs learned of m's addresses, if m's
// names are cached (objectCache: the same key as its symbol table's, with
// the versions of the rules that give the answers). It runs in load, once
// the debug file is known.
func (ms *moduleSymbols) loadLearned(m *modules.Module, cacheDir string) {
	cache, key := objectCache(m, ms.debug, cacheDir)
	if cache == nil {
		return
	}
	ms.namesCache = cache
	ms.namesKey = fmt.Sprintf("%s; names v%d; answers v%d", key, learnedVersion, debuginfo.AnswersVersion)
	if b, ok := cache.Load(m.BuildID, "names", ms.namesKey); ok {
		if ln, err := unmarshalLearned(b); err == nil {
			ms.seen = ln
		}
	}
}

// namesHash identifies m's names for a chainKey of another module: 0 if
// they are not cached (a chain that depends on them is then not kept).
func (ms *moduleSymbols) namesHash(m *modules.Module) uint64 {
	if ms.namesKey == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(m.BuildID))
	h.Write([]byte{0})
	h.Write([]byte(ms.namesKey))
	return max(h.Sum64(), 1)
}

// learnFrames keeps fr as vaddr's answer for later runs. Called with mu
// held.
func (ms *moduleSymbols) learnFrames(vaddr uint64, fr []debuginfo.Frame) {
	if ms.namesKey == "" || len(ms.added.frames) >= maxLearnedPCs {
		return // (a PC seen before is never looked up: sourceFrames)
	}
	if ms.added.frames == nil {
		ms.added.frames = map[uint64][]debuginfo.Frame{}
	}
	ms.added.frames[vaddr] = fr
}

// learnChain keeps c as k's answer for later runs.
func (ms *moduleSymbols) learnChain(k chainKey, c []debuginfo.TailCallFrame) {
	if ms.namesKey == "" {
		return // (a question answered before is not asked: appendTailCalls)
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if len(ms.added.chains) >= maxLearnedChains {
		return
	}
	if ms.added.chains == nil {
		ms.added.chains = map[chainKey][]debuginfo.TailCallFrame{}
	}
	ms.added.chains[k] = c
}

// saveLearned writes what earlier runs and this one learned of m back to
// the cache, if this run learned anything and every read of m's DWARF
// succeeded (a failed read can leave an answer short: none is kept then).
func (ms *moduleSymbols) saveLearned(m *modules.Module) {
	if ms.namesKey == "" {
		return
	}
	// What was learned first, the failures after: an answer that used a
	// unit that failed was given after the failure was counted.
	ms.mu.Lock()
	add := learnedNames{frames: maps.Clone(ms.added.frames), chains: maps.Clone(ms.added.chains)}
	ms.mu.Unlock()
	if add.len() == 0 || ms.unsure.Load() {
		return
	}
	if ms.linesStarted.Load() {
		select {
		case <-ms.linesDone:
			if ms.lines != nil && ms.lines.Failures() > 0 {
				return
			}
		default: // still loading: nothing of them was learned
		}
	}
	seen := ms.seen
	if seen == nil {
		seen = &learnedNames{}
	}
	ms.namesCache.Store(m.BuildID, "names", ms.namesKey, seen.merged(&add).appendBinary(nil)) // a failed write costs the next run time only
}
