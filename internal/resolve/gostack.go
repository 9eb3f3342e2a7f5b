package resolve

import (
	"stacktop/gort"
	"stacktop/internal/modules"
)

// goStacks follows a Go program's stack switches (gort): a thread on its
// system stack inside runtime.systemstack continues on its goroutine's
// stack, as Go's own traceback shows it. The layout is read once per
// executable; a program that is not Go, or whose DWARF is gone, has no
// switcher and walks as before.
type goStacks struct {
	mod      *modules.Module // the Go module the layout was read from (or tried)
	switcher *gort.Switcher
	Err      error // why the switch is off for a Go program (gort.Load's error)
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
			return
		}
		g.mod, g.switcher, g.Err = m, nil, nil
		l, err := gort.Load(m.File)
		if err != nil {
			g.Err = err
			return
		}
		g.switcher = l.Switcher(em.Bias)
		return
	}
	*g = goStacks{}
}
