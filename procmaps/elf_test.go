package procmaps

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"testing"

	"stacktop/internal/fuzzbudget"
)

// note encodes one ELF note padded to pad bytes.
func note(order binary.ByteOrder, name string, typ uint32, desc []byte, pad int) []byte {
	var b bytes.Buffer
	w := func(v uint32) { binary.Write(&b, order, v) }
	w(uint32(len(name)))
	w(uint32(len(desc)))
	w(typ)
	b.WriteString(name)
	for b.Len()%pad != 0 {
		b.WriteByte(0)
	}
	b.Write(desc)
	for b.Len()%pad != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

func TestFindBuildIDNote(t *testing.T) {
	id := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3}
	le, be := binary.LittleEndian, binary.BigEndian
	tests := []struct {
		name  string
		data  []byte
		order binary.ByteOrder
		align uint64
		want  []byte
		err   bool
	}{
		{"alone", note(le, "GNU\x00", 3, id, 4), le, 4, id, false},
		{"big endian", note(be, "GNU\x00", 3, id, 4), be, 4, id, false},
		{"after ABI tag", append(note(le, "GNU\x00", 1, []byte{0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, 4), note(le, "GNU\x00", 3, id, 4)...), le, 4, id, false},
		{"8-aligned after property", append(note(le, "GNU\x00", 5, make([]byte, 12), 8), note(le, "GNU\x00", 3, id, 8)...), le, 8, id, false},
		{"other owner", note(le, "Go\x00\x00", 3, id, 4), le, 4, nil, false},
		{"none", nil, le, 4, nil, false},
		{"truncated header", []byte{4, 0, 0}, le, 4, nil, false},
		{"huge name", note(le, "GNU\x00", 3, id, 4)[:12], le, 4, nil, true},
		{"desc past end", note(le, "GNU\x00", 3, id, 4)[:20], le, 4, nil, true},
		{"empty id", note(le, "GNU\x00", 3, nil, 4), le, 4, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindBuildIDNote(tt.data, tt.order, tt.align)
			if (err != nil) != tt.err {
				t.Fatalf("err %v, want error %v", err, tt.err)
			}
			var ne *NoteError
			if err != nil && !errors.As(err, &ne) {
				t.Fatalf("error %T is not a *NoteError", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("got %x, want %x", got, tt.want)
			}
		})
	}
}

func FuzzFindBuildIDNote(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add(note(binary.LittleEndian, "GNU\x00", 3, []byte{1, 2, 3, 4}, 4), uint8(4))
	f.Add(append(note(binary.LittleEndian, "GNU\x00", 5, make([]byte, 12), 8), note(binary.LittleEndian, "GNU\x00", 3, []byte{9}, 8)...), uint8(8))
	f.Fuzz(func(t *testing.T, b []byte, align uint8) {
		id, err := FindBuildIDNote(b, binary.LittleEndian, uint64(align))
		if err == nil && id != nil && (len(id) == 0 || len(id) > len(b)) {
			t.Fatalf("id of %d bytes from %d", len(id), len(b))
		}
	})
}

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
