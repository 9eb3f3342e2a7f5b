package resolve

import "stacktop/unwind"

// PrefetchLines starts loading the line tables of the modules frames are
// in, each on a goroutine of its own (as Name would on first use), and
// returns without waiting for them. A dump walks each thread as it samples
// it and names the frames only once every thread was sampled: prefetched,
// the tables load during the sampling instead of after it. The symbol
// table of a module not seen before is read here, as Name would read it.
// Nothing with NoLines.
func (r *Resolver) PrefetchLines(frames []unwind.Frame) {
	if r.opts.Symbols.NoLines {
		return
	}
	var last *moduleSymbols
	for _, f := range frames {
		em, ok := r.space.Find(f.PC)
		if !ok || em.Module == nil {
			continue
		}
		ms := r.syms.module(r, em.Module)
		if ms == last {
			continue
		}
		last = ms
		ms.startLines(em.Module, r.opts.Symbols.CacheDir)
	}
}
