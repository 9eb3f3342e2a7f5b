package debuginfo

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
)

// Call sites: the DWARF 5 DW_TAG_call_site entries (DW_TAG_GNU_call_site
// before DWARF 5) that GCC emits at -O1 and above with -g. Each says where
// a call or a tail call (a jump that ends its function) returns to and,
// when known statically, which function it calls. A tail call leaves no
// return address on the stack: the function that made it is gone from the
// unwound stack. gdb rebuilds it from these entries (its "tailcall"
// frames), and so can a sampler: see TailChain.

// DWARF 5 and GNU attribute and tag numbers (debug/dwarf names some of
// them; the GNU ones it does not).
const (
	tagCallSite      dwarf.Tag  = 0x48
	tagGNUCallSite   dwarf.Tag  = 0x4109
	attrCallReturnPC dwarf.Attr = 0x7d
	attrCallOrigin   dwarf.Attr = 0x7f
	attrCallTailCall dwarf.Attr = 0x82
	attrCallTarget   dwarf.Attr = 0x83
	attrGNUTailCall  dwarf.Attr = 0x2115
	attrGNUTarget    dwarf.Attr = 0x2113
	opAddr                      = 0x03 // DW_OP_addr
)

// CallSite is one call or tail call of the code.
type CallSite struct {
	ReturnPC uint64 // ELF virtual address after the call (DW_AT_call_return_pc)
	Func     uint64 // entry of the out-of-line function holding the call; 0 if unknown
	TailCall bool
	// Target is the entry address of the called function when DWARF says
	// it (a definition, or a DW_OP_addr target); else TargetName names it
	// (a declaration: a function of another unit or another object).
	Target     uint64
	TargetName string
}

// CallSites indexes an object's call sites by return address, and its
// tail calls by the function making them. It is safe for concurrent use.
// Built from a whole DWARF it holds every call site from the start; built
// from a lazy line index (NewCallSitesFromLines) it reads a unit's call
// sites at the first lookup that needs them, and the NoWait methods let a
// caller that must not wait for that start it in the background.
type CallSites struct {
	byReturn map[uint64]CallSite
	tails    map[uint64][]CallSite // by Func
	lazy     *lazyCallSites        // non-nil: the maps are empty, units are read one by one
}

// Len is the number of call sites indexed (when lazy: in the units read so
// far).
func (c *CallSites) Len() int {
	if c.lazy != nil {
		return c.lazy.len()
	}
	return len(c.byReturn)
}

// Decoded counts the units whose call sites were read since the index was
// made (always 0 for an index built whole): a caller told "not ready" need
// not ask again before it changes.
func (c *CallSites) Decoded() int64 {
	if c.lazy == nil {
		return 0
	}
	return c.lazy.decoded.Load()
}

// At returns the call site whose return address is pc (an ELF virtual
// address).
func (c *CallSites) At(pc uint64) (CallSite, bool) {
	s, ok, _ := c.at(pc, true)
	return s, ok
}

// AtNoWait is At for callers that must not wait for a unit to be read: if
// the unit holding the call is not read yet, it starts reading it on a
// goroutine of its own and returns ready false.
func (c *CallSites) AtNoWait(pc uint64) (site CallSite, ok, ready bool) {
	return c.at(pc, false)
}

func (c *CallSites) at(pc uint64, wait bool) (CallSite, bool, bool) {
	if c.lazy == nil {
		s, ok := c.byReturn[pc]
		return s, ok, true
	}
	// The call instruction ends at pc: its unit is the one holding pc-1.
	units, ready := c.lazy.unitsAt(pc-1, wait)
	for _, u := range units {
		if s, ok := u.byReturn[pc]; ok {
			return s, true, ready
		}
	}
	return CallSite{}, false, ready
}

// TailCalls returns the tail calls made by the function whose entry is
// entry (read-only).
func (c *CallSites) TailCalls(entry uint64) []CallSite {
	t, _ := c.tailCalls(entry, true)
	return t
}

func (c *CallSites) tailCalls(entry uint64, wait bool) ([]CallSite, bool) {
	if c.lazy == nil {
		return c.tails[entry], true
	}
	units, ready := c.lazy.unitsAt(entry, wait)
	var out []CallSite
	for i, u := range units {
		if i == 0 {
			out = u.tails[entry] // the usual case: one unit, nothing copied
			continue
		}
		if t := u.tails[entry]; len(t) > 0 {
			out = append(out[:len(out):len(out)], t...)
		}
	}
	return out, ready
}

// maxCallSites bounds the index, so a corrupt or enormous object cannot
// make it grow without bound (libc's debug file has about 60,000).
const maxCallSites = 1 << 21

// NewCallSites reads the call sites of the object whose DWARF is in f
// (the object itself or its separate debug file). An object without
// DWARF returns an error wrapping ErrNoDWARF.
func NewCallSites(f *elf.File) (*CallSites, error) {
	d, err := loadDWARF(f)
	if err != nil {
		return nil, err
	}
	return NewCallSitesFromDWARF(d)
}

// NewCallSitesFromLines reads the call sites of the DWARF that l indexes,
// sharing its decompressed sections (reading them is most of the cost).
// When l is lazy (the object has .debug_aranges) so are the call sites:
// each unit's are read at the first lookup that needs that unit (see
// lazyCallSites), and nothing is read here.
func NewCallSitesFromLines(l *Lines) (*CallSites, error) {
	if l.d == nil {
		return &CallSites{lazy: &lazyCallSites{l: l, units: map[dwarf.Offset]*callSiteSlot{}}}, nil
	}
	return NewCallSitesFromDWARF(l.d)
}

// NewCallSitesFromDWARF reads d's call sites. Entries it cannot decode
// are skipped; a unit that cannot be read ends the scan with an error
// saying where, keeping what was read before it.
func NewCallSitesFromDWARF(d *dwarf.Data) (c *CallSites, err error) {
	c = &CallSites{byReturn: map[uint64]CallSite{}, tails: map[uint64][]CallSite{}}
	defer func() {
		// debug/dwarf can panic on hostile input.
		if p := recover(); p != nil {
			err = &FormatError{".debug_info", -1, fmt.Errorf("call sites: %v", p)}
		}
	}()
	// Origins are read after the scan: a second reader seeks to each.
	or := d.Reader()
	return c, c.scan(d.Reader(), func(dwarf.Offset) *dwarf.Reader { return or })
}

// scan adds the call sites r reads from its position to the end of its
// data. readerAt gives a reader of the data that holds a DIE offset (nil
// if none does), for the callees named through DW_AT_call_origin.
func (c *CallSites) scan(r *dwarf.Reader, readerAt func(dwarf.Offset) *dwarf.Reader) error {
	origins := map[dwarf.Offset]originInfo{}
	type open struct {
		entry uint64 // function entry, 0 for a scope that is not one
	}
	var stack []open
	cur := func() uint64 {
		for i := len(stack) - 1; i >= 0; i-- {
			if stack[i].entry != 0 {
				return stack[i].entry
			}
		}
		return 0
	}
	var pending []struct {
		site   CallSite
		origin dwarf.Offset
	}
	for {
		e, err := r.Next()
		if err != nil {
			return &FormatError{".debug_info", -1, err}
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		switch e.Tag {
		case dwarf.TagCompileUnit, dwarf.TagPartialUnit:
			stack = stack[:0]
			if lang, ok := e.Val(dwarf.AttrLanguage).(int64); ok && lang == langGo && e.Children {
				// Go's compiler writes no call sites: its units (the
				// runtime's alone is most of a Go program's DWARF) are
				// skipped whole.
				r.SkipChildren()
				continue
			}
		case dwarf.TagSubprogram:
			if lo, ok := e.Val(dwarf.AttrLowpc).(uint64); ok {
				if e.Children {
					stack = append(stack, open{entry: lo})
				}
				continue
			}
		case dwarf.TagLexDwarfBlock, dwarf.TagInlinedSubroutine, dwarf.TagNamespace:
			// Scopes that hold call sites: walk into them.
		case tagCallSite, tagGNUCallSite:
			site, origin, ok := readCallSite(e, cur())
			if ok && len(c.byReturn) < maxCallSites {
				if site.Target == 0 && site.TargetName == "" && origin != 0 {
					pending = append(pending, struct {
						site   CallSite
						origin dwarf.Offset
					}{site, origin})
				} else {
					c.add(site)
				}
			}
			if e.Children {
				r.SkipChildren()
			}
			continue
		default:
			// Types, variables, parameters, call-site parameters: nothing
			// below them is a call site; not decoding them is most of the
			// speed of the scan.
			if e.Children {
				r.SkipChildren()
			}
			continue
		}
		if e.Children {
			stack = append(stack, open{})
		}
	}
	for _, p := range pending {
		info, ok := origins[p.origin]
		if !ok {
			info = readOrigin(readerAt, p.origin)
			origins[p.origin] = info
		}
		p.site.Target, p.site.TargetName = info.entry, info.name
		c.add(p.site)
	}
	return nil
}

// langGo is DW_LANG_Go.
const langGo = 0x0016

func (c *CallSites) add(s CallSite) {
	c.byReturn[s.ReturnPC] = s
	if s.TailCall && s.Func != 0 {
		c.tails[s.Func] = append(c.tails[s.Func], s)
	}
}

// readCallSite decodes one call-site entry; origin is the DIE it calls
// when that has to be looked up.
func readCallSite(e *dwarf.Entry, fn uint64) (CallSite, dwarf.Offset, bool) {
	s := CallSite{Func: fn}
	if pc, ok := e.Val(attrCallReturnPC).(uint64); ok {
		s.ReturnPC = pc
	} else if pc, ok := e.Val(dwarf.AttrLowpc).(uint64); ok && e.Tag == tagGNUCallSite {
		s.ReturnPC = pc // GNU: DW_AT_low_pc is the return address
	} else {
		return s, 0, false
	}
	if f, ok := e.Val(attrCallTailCall).(bool); ok && f {
		s.TailCall = true
	}
	if f, ok := e.Val(attrGNUTailCall).(bool); ok && f {
		s.TailCall = true
	}
	for _, a := range []dwarf.Attr{attrCallTarget, attrGNUTarget} {
		if b, ok := e.Val(a).([]byte); ok && len(b) == 9 && b[0] == opAddr {
			// Only a constant address is a static target; a register-based
			// expression needs the caller's registers at the call.
			s.Target = leUint64(b[1:])
			return s, 0, true
		}
	}
	for _, a := range []dwarf.Attr{attrCallOrigin, dwarf.AttrAbstractOrigin} {
		if off, ok := e.Val(a).(dwarf.Offset); ok {
			return s, off, true
		}
	}
	return s, 0, true
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// originInfo is what a call site's DW_AT_call_origin says about its
// callee: its entry, or its name when it is only declared here.
type originInfo struct {
	entry uint64
	name  string
}

// readOrigin follows a callee DIE: its low_pc when defined, else its
// linkage name or name (through DW_AT_abstract_origin and
// DW_AT_specification, a few links deep).
func readOrigin(readerAt func(dwarf.Offset) *dwarf.Reader, off dwarf.Offset) originInfo {
	var info originInfo
	for hop := 0; hop < 4; hop++ {
		r := readerAt(off)
		if r == nil {
			return info
		}
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			return info
		}
		if lo, ok := e.Val(dwarf.AttrLowpc).(uint64); ok && info.entry == 0 {
			info.entry = lo
		}
		if info.name == "" {
			if n, ok := e.Val(dwarf.AttrLinkageName).(string); ok {
				info.name = n
			} else if n, ok := e.Val(dwarf.AttrName).(string); ok {
				info.name = n
			}
		}
		next, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			next, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok || next == off {
			return info
		}
		off = next
	}
	return info
}

// TailCallFrame is one function a tail-call chain passes through: the
// function at Func left the stack by jumping from the instruction before
// ReturnPC (the address gdb shows for the frame).
type TailCallFrame struct {
	Func     uint64
	ReturnPC uint64
}

// maxTailDepth bounds a chain (gdb does not bound it, but chains longer
// than a few links are not unique in practice).
const maxTailDepth = 8

// maxTailEdges bounds the tail calls one search looks at: a dispatcher
// that jumps to many functions, each jumping on, would make the search
// exponential. A search cut short proves nothing, so it finds no chain.
const maxTailEdges = 256

// TailChain finds the functions between a caller and its callee that
// tail calls removed from the stack. site is the call at the caller's
// return address. resolve turns a callee named only by a declaration into
// its entry in this object (0 when it is not defined here); isCallee
// reports whether a target (an entry in this object, or when 0 the name)
// is the function the callee frame is in. The result is innermost first
// (the function that jumped to the callee first) and is empty when the
// call site calls the callee directly, when no chain reaches it, or when
// more than one does (the chain must be unambiguous, as gdb requires).
func (c *CallSites) TailChain(site CallSite, resolve func(name string) uint64, isCallee func(entry uint64, name string) bool) []TailCallFrame {
	chain, _ := c.tailChain(site, resolve, isCallee, true)
	return chain
}

// TailChainNoWait is TailChain for callers that must not wait for units to
// be read: when the search needs a unit not read yet, it starts reading it
// in the background and returns ready false (and no chain); asked again
// later, it gives TailChain's answer.
func (c *CallSites) TailChainNoWait(site CallSite, resolve func(name string) uint64, isCallee func(entry uint64, name string) bool) (chain []TailCallFrame, ready bool) {
	return c.tailChain(site, resolve, isCallee, false)
}

func (c *CallSites) tailChain(site CallSite, resolve func(name string) uint64, isCallee func(entry uint64, name string) bool, wait bool) ([]TailCallFrame, bool) {
	target := func(s CallSite) uint64 {
		if s.Target == 0 && s.TargetName != "" && resolve != nil {
			return resolve(s.TargetName)
		}
		return s.Target
	}
	first := target(site)
	if first == 0 || isCallee(first, site.TargetName) {
		return nil, true
	}
	var (
		found  [][]TailCallFrame
		path   []TailCallFrame
		seen   = map[uint64]bool{}
		budget = maxTailEdges
		ready  = true
	)
	var walk func(fn uint64, depth int)
	walk = func(fn uint64, depth int) {
		if depth >= maxTailDepth || len(found) > 1 || seen[fn] || budget <= 0 {
			return
		}
		tails, ok := c.tailCalls(fn, wait)
		if !ok {
			// Not read yet: keep searching, so that one call starts
			// every unit this search needs that can be known now.
			ready = false
		}
		budget -= len(tails)
		seen[fn] = true
		defer delete(seen, fn)
		for _, t := range tails {
			path = append(path, TailCallFrame{Func: fn, ReturnPC: t.ReturnPC})
			switch next := target(t); {
			case isCallee(next, t.TargetName):
				found = append(found, append([]TailCallFrame(nil), path...))
			case next != 0:
				walk(next, depth+1)
			}
			path = path[:len(path)-1]
		}
	}
	walk(first, 0)
	if len(found) > 1 || budget <= 0 {
		// Units not read yet could only add paths: the answer is known.
		return nil, true
	}
	if !ready {
		return nil, false
	}
	if len(found) != 1 {
		// None, several, or more paths than the budget lets us rule out.
		return nil, true
	}
	chain := found[0]
	// Innermost first: the last jump made is the one nearest the callee.
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, true
}
