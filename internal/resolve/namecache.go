package resolve

import (
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/unwind"
)

// nameCache keeps the named frames of each unwound frame, and the
// tail-call frames found between each callee and caller, so that the
// frames many stacks share (a thousand threads blocked in the same libc
// call) are named once: a hit costs a map lookup and a copy instead of
// the module search, the symbol and line lookups, the call-site lookup
// and the frames built from them.
//
// What is kept depends only on the frame (PC, exactness, method), the
// naming options and the address space: the Resolver drops the cache
// whenever it reads a changed address space (a library unloaded and
// another mapped at its address). Answers given while some lines were
// pending (SymbolOptions.AsyncLines) are not kept, nor frames of code
// outside any file (JIT code, named from a perf map that may grow).
// Used only from the Resolver's goroutine: no lock.
type nameCache struct {
	// By PC (the caller's, for tail calls): a few variants each, told
	// apart by the rest of the key. A map keyed by one uint64 hashes
	// several times faster than one keyed by a struct.
	frames map[uint64][]namedFrames
	tails  map[uint64][]namedFrames
	n      int // variants kept, in both maps
}

// namedFrames is one variant's frames (nil: none, for tail calls).
type namedFrames struct {
	key    variant
	frames []profile.Frame
}

// variant is what, besides the PC, decides a frame's names: for
// appendFrames the frame's method and exactness, for tail calls the
// callee's PC and both frames' exactness; and the naming options.
type variant struct {
	pc                 uint64 // tail calls: the callee's
	method             unwind.Method
	exact, callerExact bool
	opts               nameOpts
}

// maxNamedFrames bounds the variants kept; past it the cache restarts.
const maxNamedFrames = 1 << 13

// nameOpts are the options that change a frame's names.
type nameOpts uint8

func keyOpts(opt SymbolOptions) nameOpts {
	var o nameOpts
	if opt.NoLines {
		o |= 1
	}
	if opt.NoInline {
		o |= 2
	}
	return o
}

func (c *nameCache) reset() {
	c.frames, c.tails, c.n = nil, nil, 0
}

func lookupVariant(m map[uint64][]namedFrames, pc uint64, key variant) ([]profile.Frame, bool) {
	for _, v := range m[pc] {
		if v.key == key {
			return v.frames, true
		}
	}
	return nil, false
}

// add keeps frames (copied) as pc's variant key in m (c.frames or
// c.tails), restarting the cache when it is full.
func (c *nameCache) add(tails bool, pc uint64, key variant, frames []profile.Frame) {
	if c.frames == nil || c.n >= maxNamedFrames {
		c.frames, c.tails, c.n = map[uint64][]namedFrames{}, map[uint64][]namedFrames{}, 0
	}
	m := c.frames
	if tails {
		m = c.tails
	}
	var kept []profile.Frame
	if len(frames) > 0 {
		kept = append(kept, frames...)
	}
	m[pc] = append(m[pc], namedFrames{key: key, frames: kept})
	c.n++
}

// maxCachedStack is the longest walk stack names from the cache alone.
const maxCachedStack = 64

// stack returns the named frames of a walk whose every frame and tail
// call is in the cache, in a slice of their exact length (a dump holds a
// thousand of them); ok is false if some are not.
func (c *nameCache) stack(frames []unwind.Frame, opt SymbolOptions) (out []profile.Frame, ok bool) {
	if len(frames) == 0 || len(frames) > maxCachedStack || c.frames == nil {
		return nil, false
	}
	var parts [2 * maxCachedStack][]profile.Frame
	o := keyOpts(opt)
	tails := !opt.NoLines
	n, total := 0, 0
	for i, f := range frames {
		if i > 0 && tails && !f.Exact {
			prev := frames[i-1]
			fr, ok := lookupVariant(c.tails, f.PC, variant{pc: prev.PC, exact: prev.Exact, opts: o})
			if !ok {
				return nil, false
			}
			parts[n], n, total = fr, n+1, total+len(fr)
		}
		fr, ok := lookupVariant(c.frames, f.PC, variant{method: f.Method, exact: f.Exact, opts: o})
		if !ok {
			return nil, false
		}
		parts[n], n, total = fr, n+1, total+len(fr)
	}
	out = make([]profile.Frame, 0, total)
	for _, fr := range parts[:n] {
		out = append(out, fr...)
	}
	return out, true
}

// appendFrames is symbolizer.appendFrames through the cache.
func (c *nameCache) appendFrames(out []profile.Frame, r *Resolver, f unwind.Frame, opt SymbolOptions, pending *bool) []profile.Frame {
	key := variant{method: f.Method, exact: f.Exact, opts: keyOpts(opt)}
	if fr, ok := lookupVariant(c.frames, f.PC, key); ok {
		return append(out, fr...)
	}
	n := len(out)
	var p bool
	out = r.syms.appendFrames(out, r, f, opt, &p)
	if p {
		*pending = true
		return out
	}
	if out[len(out)-1].Module == "" {
		return out // JIT code, or no mapping: not kept
	}
	c.add(false, f.PC, key, out[n:])
	return out
}

// appendTailCalls is symbolizer.appendTailCalls through the cache.
func (c *nameCache) appendTailCalls(out []profile.Frame, r *Resolver, callee, caller unwind.Frame, opt SymbolOptions, pending *bool) []profile.Frame {
	if opt.NoLines || caller.Exact || r.tails == nil {
		return out // no tail calls to look for
	}
	key := variant{pc: callee.PC, exact: callee.Exact, callerExact: caller.Exact, opts: keyOpts(opt)}
	if fr, ok := lookupVariant(c.tails, caller.PC, key); ok {
		return append(out, fr...)
	}
	n := len(out)
	var p bool
	out = r.syms.appendTailCalls(out, r, callee, caller, opt, &p)
	if p {
		*pending = true
		return out
	}
	for i := n; i < len(out); i++ {
		if out[i].Module == "" {
			return out
		}
	}
	c.add(true, caller.PC, key, out[n:])
	return out
}
