//go:build linux

package main

// What the unwinder needs of a fixture (target): its modules, symbols and
// mappings, and the walk options the live test and the replay share.

import (
	"debug/elf"
	"fmt"
	"path/filepath"

	"codeberg.org/stacktop/stacktop/backchain"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// target is what the unwinder needs of a fixture: its modules and
// symbols (static executables: the ELF and the vDSO).
type target struct {
	name string
	mods unwind.ModuleList
	snap []unwind.SnapshotModule
	syms []elf.Symbol
	maps []procmaps.Mapping
}

func loadTarget(pid int, path string) (*target, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return nil, fmt.Errorf("%s: not a static non-PIE executable", path)
	}
	t := &target{name: filepath.Base(path)}
	t.syms, _ = f.Symbols()
	var sm unwind.SnapshotModule
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			sm = unwind.SnapshotModule{Start: p.Vaddr, End: p.Vaddr + p.Memsz, Path: t.name}
		}
	}
	if sec := f.Section(".sframe"); sec != nil {
		if sm.SFrame, err = sec.Data(); err != nil {
			return nil, fmt.Errorf("%s: .sframe: %w", path, err)
		}
		sm.SFrameVaddr = sec.Addr
	}
	t.snap = append(t.snap, sm)
	if t.maps, err = procmaps.ReadMaps(pid); err != nil {
		return nil, err
	}
	for _, m := range t.maps {
		if m.Kind == procmaps.KindVDSO {
			t.snap = append(t.snap, unwind.SnapshotModule{Start: m.Start, End: m.End, Path: "[vdso]", IsVDSO: true})
		}
	}
	s := unwind.Snapshot{Modules: t.snap, Regs: regs.Set{Arch: regs.ARM64}}
	if t.mods, err = s.ModuleList(); err != nil {
		return nil, err
	}
	return t, nil
}

// stackOf is the mapping that holds sp.
func (t *target) stackOf(sp uint64) unwind.StackBounds {
	for _, m := range t.maps {
		if m.Contains(sp) {
			return unwind.StackBounds{Low: m.Start, High: m.End}
		}
	}
	return unwind.StackBounds{}
}

func (t *target) symbolize(pc uint64) (elf.Symbol, bool) {
	for _, s := range t.syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && pc >= s.Value && pc < s.Value+s.Size {
			return s, true
		}
	}
	return elf.Symbol{}, false
}

// describe names frame i's PC as stacktop dump does (profile.Frame.Label);
// a caller's is looked up at PC-1, its call.
func (t *target) describe(pc uint64, i int) string {
	look := pc
	if i > 0 {
		look--
	}
	f := profile.Frame{PC: pc}
	if s, ok := t.symbolize(look); ok {
		f.Function, f.Offset = s.Name, pc-s.Value
	} else if m, ok := t.mods.ModuleAt(pc); ok {
		f.Module, f.Offset = m.Path, pc-m.Start
	}
	return f.Label()
}

// Options is the walk both the live test and the snapshot replay use:
// SFrame first, then frame pointers (amd64, arm64) or the back chain.
func Options(arch regs.Arch, mods unwind.ModuleList, stack unwind.StackBounds, pac uint64) unwind.Options {
	o := unwind.Options{Stack: stack, PACMask: pac}
	if arch == regs.S390X {
		o.Fallback = backchain.Unwinder{
			InVDSO: func(pc uint64) bool { m, ok := mods.ModuleAt(pc); return ok && m.IsVDSO },
			IsCode: func(pc uint64) bool { _, ok := mods.ModuleAt(pc); return ok },
		}
	}
	return o
}
