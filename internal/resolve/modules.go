package resolve

import (
	"debug/elf"
	"runtime"
	"sort"
	"sync"
	"weak"

	"stacktop/cfi"
	"stacktop/internal/modules"
	"stacktop/unwind"
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
			m.CFI = cfiFor(em.Module)
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

// lazyCFI is a module's CFI table, built at the first lookup: most modules
// of a process (and every module whose frames SFrame covers) never need
// one, and building one costs a parse of its whole .eh_frame.
type lazyCFI struct {
	file *elf.File // the module's, not the module: the cache must not keep it alive
	once sync.Once
	tab  *cfi.Table
	err  error // why the module has no table; lookups then miss
}

func (l *lazyCFI) Lookup(pc uint64) (cfi.Row, error) {
	l.once.Do(func() {
		if l.file == nil {
			l.err = cfi.ErrUnsupported
			return
		}
		l.tab, l.err = cfi.Load(l.file)
	})
	if l.tab == nil {
		// No usable CFI is not a corrupt table for the walker: it falls
		// back to frame pointers as for a PC without an FDE.
		return cfi.Row{}, cfi.ErrNoFDE
	}
	return l.tab.Lookup(pc)
}

// The CFI of a module is shared by every process and address-space
// snapshot that maps it, for as long as the ModuleCache keeps the module:
// the cache holds the module weakly and drops the entry when it goes.
var cfiCache struct {
	sync.Mutex
	m map[weak.Pointer[modules.Module]]*lazyCFI
}

func cfiFor(m *modules.Module) *lazyCFI {
	key := weak.Make(m)
	cfiCache.Lock()
	defer cfiCache.Unlock()
	if l, ok := cfiCache.m[key]; ok {
		return l
	}
	if cfiCache.m == nil {
		cfiCache.m = map[weak.Pointer[modules.Module]]*lazyCFI{}
	}
	l := &lazyCFI{file: m.File}
	cfiCache.m[key] = l
	runtime.AddCleanup(m, func(k weak.Pointer[modules.Module]) {
		cfiCache.Lock()
		delete(cfiCache.m, k)
		cfiCache.Unlock()
	}, key)
	return l
}
