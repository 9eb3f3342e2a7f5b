package resolve

import (
	"sort"

	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/unwind"
)

// moduleIndex adapts a modules.AddressSpace to the unwinder's Modules: one
// unwind.Module per executable mapping, in address order.
type moduleIndex struct {
	mods []unwind.Module
}

func newModuleIndex(space *modules.AddressSpace) moduleIndex {
	idx := moduleIndex{mods: make([]unwind.Module, 0, len(space.Exec))}
	for i := range space.Exec {
		em := &space.Exec[i]
		m := unwind.Module{Start: em.Start, End: em.End, Bias: em.Bias, Path: em.Path, IsVDSO: em.IsVDSO}
		if em.Module != nil {
			m.SFrame = em.Module.SFrame
			m.CFI = em.Module.CFI()
		}
		idx.mods = append(idx.mods, m)
	}
	return idx
}

// ModuleAt implements unwind.Modules.
func (idx *moduleIndex) ModuleAt(pc uint64) (*unwind.Module, bool) {
	i := sort.Search(len(idx.mods), func(i int) bool { return idx.mods[i].End > pc })
	if i < len(idx.mods) && idx.mods[i].Start <= pc {
		return &idx.mods[i], true
	}
	return nil, false
}
