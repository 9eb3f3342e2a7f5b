package debuginfo

import (
	"debug/dwarf"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// lazyCallSites reads call sites one compile unit at a time, for an index
// built on a lazy line index: a lookup reads the units whose
// .debug_aranges ranges hold its address (the call's, or a function's
// entry), each once, from the unit's own image as the line index does.
// A call site's DW_AT_call_origin usually points into its own unit; one
// into another unit (LTO) opens that unit for the time of the lookup.
type lazyCallSites struct {
	l       *Lines
	mu      sync.Mutex // guards units
	units   map[dwarf.Offset]*callSiteSlot
	decoded atomic.Int64
	sites   atomic.Int64 // call sites in the units read
}

// callSiteSlot is one unit's reading: done is closed when sites is set.
type callSiteSlot struct {
	done  chan struct{}
	sites *CallSites // never lazy; empty if the unit could not be read
	err   error
}

func (z *lazyCallSites) len() int { return int(z.sites.Load()) }

// unitsAt returns the call sites of the units whose ranges hold pc,
// reading each on first use. With wait false it never blocks: units not
// read yet are started on goroutines of their own, left out, and ready is
// false.
func (z *lazyCallSites) unitsAt(pc uint64, wait bool) (out []*CallSites, ready bool) {
	l := z.l
	ready = true
	i := sort.Search(len(l.units), func(i int) bool { return l.units[i].lo > pc }) - 1
	for ; i >= 0 && l.maxEnd[i] > pc; i-- {
		u := l.units[i]
		if pc < u.lo || pc >= u.hi {
			continue
		}
		cs, ok := z.unit(u.cu, wait)
		if !ok {
			ready = false
			continue
		}
		if cs != nil && len(cs.byReturn) > 0 {
			out = append(out, cs)
		}
	}
	return out, ready
}

func (z *lazyCallSites) unit(off dwarf.Offset, wait bool) (*CallSites, bool) {
	z.mu.Lock()
	s := z.units[off]
	first := s == nil
	if first {
		s = &callSiteSlot{done: make(chan struct{})}
		z.units[off] = s
	}
	z.mu.Unlock()
	if first {
		if !wait {
			go z.decode(off, s)
			return nil, false
		}
		z.decode(off, s)
	}
	if wait {
		<-s.done
		return s.sites, true
	}
	select {
	case <-s.done:
		return s.sites, true
	default:
		return nil, false
	}
}

// decode reads the call sites of the unit at off. Decoding shares the line
// index's lock: both open units of the same lazily read sections, and one
// unit image at a time bounds the memory.
func (z *lazyCallSites) decode(off dwarf.Offset, s *callSiteSlot) {
	z.l.decodeMu.Lock()
	defer z.l.decodeMu.Unlock()
	defer z.decoded.Add(1)
	defer close(s.done)
	s.sites = &CallSites{byReturn: map[uint64]CallSite{}, tails: map[uint64][]CallSite{}}
	if s.err = z.read(off, s.sites); s.err != nil {
		z.l.failed.Add(1)
	}
	z.sites.Add(int64(len(s.sites.byReturn)))
}

func (z *lazyCallSites) read(off dwarf.Offset, c *CallSites) (err error) {
	defer func() {
		// debug/dwarf can panic on hostile input.
		if p := recover(); p != nil {
			err = &FormatError{".debug_info", int64(off), fmt.Errorf("call sites: %v", p)}
		}
	}()
	lz := z.l.lazy
	u, err := lz.open(uint64(off), false)
	if err != nil {
		return err
	}
	defer u.free()
	var others []*openedUnit
	defer func() {
		for _, o := range others {
			o.free()
		}
	}()
	or := u.d.Reader()
	readerAt := func(die dwarf.Offset) *dwarf.Reader {
		if uint64(die) >= u.h.dieOff && uint64(die) < u.h.end {
			return or
		}
		for _, o := range others {
			if uint64(die) >= o.h.dieOff && uint64(die) < o.h.end {
				return o.d.Reader()
			}
		}
		start, err := lz.unitAt(uint64(die))
		if err != nil {
			z.l.failed.Add(1) // a callee's name or target is lost
			return nil
		}
		o, err := lz.open(start, false)
		if err != nil {
			z.l.failed.Add(1)
			return nil
		}
		others = append(others, o)
		if uint64(die) < o.h.dieOff {
			return nil // a unit's header, not a DIE
		}
		return o.d.Reader()
	}
	r := u.d.Reader()
	r.Seek(dwarf.Offset(u.h.dieOff))
	// The image ends with the unit: the scan stops there.
	return c.scan(r, readerAt)
}
