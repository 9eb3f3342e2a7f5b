package buildid

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
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

func TestFindNote(t *testing.T) {
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
			got, err := FindNote(tt.data, tt.order, tt.align)
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

func FuzzFindNote(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add(note(binary.LittleEndian, "GNU\x00", 3, []byte{1, 2, 3, 4}, 4), uint8(4))
	f.Add(append(note(binary.LittleEndian, "GNU\x00", 5, make([]byte, 12), 8), note(binary.LittleEndian, "GNU\x00", 3, []byte{9}, 8)...), uint8(8))
	f.Fuzz(func(t *testing.T, b []byte, align uint8) {
		id, err := FindNote(b, binary.LittleEndian, uint64(align))
		if err == nil && id != nil && (len(id) == 0 || len(id) > len(b)) {
			t.Fatalf("id of %d bytes from %d", len(id), len(b))
		}
	})
}
