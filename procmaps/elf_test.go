package procmaps

import (
	"debug/elf"
	"errors"
	"testing"
)

func load(off, vaddr, filesz uint64, flags elf.ProgFlag) *elf.Prog {
	return &elf.Prog{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: flags, Off: off, Vaddr: vaddr, Filesz: filesz, Memsz: filesz}}
}

func TestLoadBias(t *testing.T) {
	const page = 0x1000
	rx, r, rw := elf.PF_R|elf.PF_X, elf.PF_R, elf.PF_R|elf.PF_W
	// A PIE linked with -z separate-code: four page-aligned segments.
	pie := &elf.File{FileHeader: elf.FileHeader{Type: elf.ET_DYN}, Progs: []*elf.Prog{
		load(0, 0, 0x628, r), load(0x1000, 0x1000, 0x1d5, rx), load(0x2000, 0x2000, 0x150, r), load(0x2db8, 0x3db8, 0x268, rw)}}
	// An old non-PIE layout: text and data share a file page, data is
	// linked 2 MiB higher.
	exec := &elf.File{FileHeader: elf.FileHeader{Type: elf.ET_EXEC}, Progs: []*elf.Prog{
		load(0, 0x400000, 0x7a4, rx), load(0x7a8, 0x6007a8, 0x230, rw)}}
	m := func(start, end, off uint64, p Perms) *Mapping {
		return &Mapping{Start: start, End: end, Offset: off, Perms: p | PermPrivate, Inode: 1, Path: "/x"}
	}
	tests := []struct {
		name string
		f    *elf.File
		m    *Mapping
		want uint64
		err  error
	}{
		{"pie header page", pie, m(0x5555_5555_4000, 0x5555_5555_5000, 0, PermRead), 0x5555_5555_4000, nil},
		{"pie text", pie, m(0x5555_5555_5000, 0x5555_5555_6000, 0x1000, PermRead|PermExec), 0x5555_5555_4000, nil},
		{"pie rodata page", pie, m(0x5555_5555_6000, 0x5555_5555_7000, 0x2000, PermRead), 0x5555_5555_4000, nil},
		{"exec text", exec, m(0x400000, 0x401000, 0, PermRead|PermExec), 0, nil},
		{"exec data shares the text page", exec, m(0x600000, 0x601000, 0, PermRead|PermWrite), 0, nil},
		{"offset past every segment", pie, m(0x1000, 0x2000, 0x5000, PermRead), 0, ErrNoLoad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadBias(tt.f, tt.m, page)
			if !errors.Is(err, tt.err) || err == nil && got != tt.want {
				t.Errorf("got %#x, %v; want %#x, %v", got, err, tt.want, tt.err)
			}
		})
	}
	if _, err := LoadBias(pie, m(0, 0x1000, 0, PermRead), 3000); err == nil {
		t.Error("page size 3000 accepted")
	}
}
