package resolve

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"codeberg.org/stacktop/stacktop/internal/gort"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/unwind"
)

// goStacks follows a Go program's stack switches (gort): a thread on its
// system stack inside runtime.systemstack continues on its goroutine's
// stack, as Go's own traceback shows it. The layout is read once per
// executable; a program that is not Go, or whose DWARF is gone, has no
// switcher and walks as before. Without DWARF the switch functions are
// still known from the symbol table, and the walks that end in one are
// counted for the user's note (Note).
type goStacks struct {
	mod      *modules.Module // the Go module the layout was read from (or tried)
	switcher *gort.Switcher
	Err      error // why the switch is off for a Go program (gort.Load's error)

	noDWARF *gort.Funcs // the switch functions, when Err is gort.ErrNoDWARF
	bias    uint64      // noDWARF's load bias
	vaddrs  []uint64    // check's buffer
	// missed counts walks that ended in a switch noDWARF knows; read by
	// Note from other goroutines (an Engine's Stats).
	missed atomic.Pointer[missedSwitches]
}

type missedSwitches struct {
	path  string
	walks atomic.Int64
}

// update finds the Go module of a new address space (the first executable
// mapping of a file with a .gopclntab, or a .go.buildinfo: a PIE keeps its
// pclntab in .data.rel.ro) and reads its layout, unless it is the one
// already read.
func (g *goStacks) update(space *modules.AddressSpace) {
	for i := range space.Exec {
		em := &space.Exec[i]
		m := em.Module
		if m == nil || m.File == nil || (m.File.Section(".gopclntab") == nil && m.File.Section(".go.buildinfo") == nil) {
			continue
		}
		if m == g.mod {
			if g.switcher != nil {
				g.switcher = g.switcher.Layout().Switcher(em.Bias)
			}
			g.bias = em.Bias
			return
		}
		g.mod, g.switcher, g.Err, g.noDWARF = m, nil, nil, nil
		l, err := gort.Load(m.File)
		if err != nil {
			g.Err = err
			if errors.Is(err, gort.ErrNoDWARF) {
				if fs, ferr := gort.LoadFuncs(m.File); ferr == nil {
					g.noDWARF, g.bias = fs, em.Bias
					g.missed.Store(&missedSwitches{path: m.Path})
				}
			}
			return
		}
		g.switcher = l.Switcher(em.Bias)
		return
	}
	g.mod, g.switcher, g.Err, g.noDWARF = nil, nil, nil, nil
}

// check counts a walk of a Go program without DWARF that ended at a
// stack switch the layout would have followed (gort.Funcs.Missed).
func (g *goStacks) check(st *unwind.Stack) {
	if g.noDWARF == nil || len(st.Frames) == 0 {
		return
	}
	g.vaddrs = g.vaddrs[:0]
	for _, f := range st.Frames {
		pc := f.PC
		if !f.Exact {
			pc--
		}
		g.vaddrs = append(g.vaddrs, pc-g.bias)
	}
	if g.noDWARF.Missed(g.vaddrs) {
		if m := g.missed.Load(); m != nil {
			m.walks.Add(1)
		}
	}
}

// GoStackNote is a one-line note for the user when stacks of a Go program
// ended at a stack switch that could not be followed for want of DWARF,
// or "" when none did. Safe to call while the target is sampled.
func (r *Resolver) GoStackNote() string {
	m := r.goStacks.missed.Load()
	if m == nil {
		return ""
	}
	n := m.walks.Load()
	if n == 0 {
		return ""
	}
	stacks := "stacks end"
	if n == 1 {
		stacks = "stack ends"
	}
	return fmt.Sprintf("%d %s at a Go stack switch (runtime.mcall, systemstack or morestack) that goes on on a goroutine's stack: %s has no DWARF (built with -ldflags=-w, or stripped), which following it needs; rebuild without -w to see the goroutine's frames",
		n, stacks, filepath.Base(m.path))
}
