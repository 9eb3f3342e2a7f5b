package modules

import (
	"bytes"
	"fmt"
	"os"
	"sort"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// ExecMapping is one executable mapping of a process, with the object it
// runs and the bias that turns the object's ELF addresses into runtime ones
// (runtime = ELF vaddr + Bias).
type ExecMapping struct {
	procmaps.Mapping
	// Module is nil for anonymous executable memory (JIT code), for the
	// vDSO (see IsVDSO) and when the file could not be opened or parsed
	// (then Err says why).
	Module *Module
	Bias   uint64
	IsVDSO bool
	Err    error
}

// Range is an address range [Start, End).
type Range struct{ Start, End uint64 }

// AddressSpace is a snapshot of one process's mappings with the module and
// bias of each executable one. It is immutable once loaded, so any number of
// goroutines may call Find and MappingAt; Refresh returns a new snapshot.
type AddressSpace struct {
	PID      int
	Mappings []procmaps.Mapping // every mapping, ascending
	Exec     []ExecMapping      // the executable ones, ascending

	cache *ModuleCache
	raw   []byte // the maps text this snapshot was built from
}

// LoadAddressSpace reads /proc/PID/maps and resolves every executable file
// mapping to a Module through cache. A mapping whose file cannot be opened or
// parsed is kept with a nil Module and its Err set; only failing to read or
// parse the maps file itself is an error.
func LoadAddressSpace(pid int, cache *ModuleCache) (*AddressSpace, error) {
	raw, err := procmaps.ReadMapsText(pid)
	if err != nil {
		return nil, err
	}
	return build(pid, cache, raw, nil)
}

func build(pid int, cache *ModuleCache, raw []byte, prev *AddressSpace) (*AddressSpace, error) {
	ms, err := procmaps.ParseMaps(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	var reuse map[procmaps.Mapping]*ExecMapping
	if prev != nil {
		reuse = make(map[procmaps.Mapping]*ExecMapping, len(prev.Exec))
		for i := range prev.Exec {
			reuse[prev.Exec[i].Mapping] = &prev.Exec[i]
		}
	}
	as := &AddressSpace{PID: pid, Mappings: ms, cache: cache, raw: raw}
	pageSize := uint64(os.Getpagesize())
	for i := range ms {
		m := &ms[i]
		if !m.IsExec() {
			continue
		}
		if old, ok := reuse[*m]; ok {
			as.Exec = append(as.Exec, *old)
			continue
		}
		em := ExecMapping{Mapping: *m}
		switch {
		case m.Kind == procmaps.KindVDSO:
			// The vDSO has no file; its image lives in the process's
			// memory. Reading it (ModuleFromImage) is left to a stage that
			// can read memory.
			em.IsVDSO = true
		case m.IsFile():
			em.Module, em.Err = cache.ForMapping(pid, m)
			if em.Err == nil {
				em.Bias, em.Err = procmaps.LoadBias(em.Module.File, m, pageSize)
				if em.Err != nil {
					em.Err = fmt.Errorf("modules: %s: %w", m.Path, em.Err)
					em.Module = nil
				}
			}
		}
		as.Exec = append(as.Exec, em)
	}
	return as, nil
}

// Refresh re-reads the maps file. If it is unchanged it returns as itself;
// otherwise a new snapshot that reuses the modules and biases of mappings
// that did not change (a dlopen opens only the new library).
func (as *AddressSpace) Refresh() (*AddressSpace, error) {
	raw, err := procmaps.ReadMapsText(as.PID)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(raw, as.raw) {
		return as, nil
	}
	return build(as.PID, as.cache, raw, as)
}

// Find returns the executable mapping holding addr.
func (as *AddressSpace) Find(addr uint64) (*ExecMapping, bool) {
	i := sort.Search(len(as.Exec), func(i int) bool { return as.Exec[i].End > addr })
	if i < len(as.Exec) && as.Exec[i].Start <= addr {
		return &as.Exec[i], true
	}
	return nil, false
}

// MappingAt returns the mapping, executable or not, holding addr: for
// example the thread stack that holds an SP.
func (as *AddressSpace) MappingAt(addr uint64) (*procmaps.Mapping, bool) {
	i := sort.Search(len(as.Mappings), func(i int) bool { return as.Mappings[i].End > addr })
	if i < len(as.Mappings) && as.Mappings[i].Start <= addr {
		return &as.Mappings[i], true
	}
	return nil, false
}

// ExecRanges returns the executable ranges of the object em belongs to: all
// executable mappings of the same Module with the same bias (a library
// loaded twice with dlmopen has two biases, hence two objects). For a
// mapping with no Module it is em's own range.
func (as *AddressSpace) ExecRanges(em *ExecMapping) []Range {
	if em.Module == nil {
		return []Range{{em.Start, em.End}}
	}
	var out []Range
	for i := range as.Exec {
		e := &as.Exec[i]
		if e.Module == em.Module && e.Bias == em.Bias {
			out = append(out, Range{e.Start, e.End})
		}
	}
	return out
}
