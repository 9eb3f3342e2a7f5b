package cfi

import "fmt"

// reader reads a CFA program or an FDE's fields. Its error is sticky: after
// the first short read every read returns zero, so a truncated program ends
// in one error instead of a panic or garbage.
type reader struct {
	b   []byte
	off int
	err error
	be  bool // fixed-size integers are big-endian (s390x)
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated %s at byte %d", what, r.off)
	}
	r.off = len(r.b)
}

func (r *reader) done() bool { return r.err != nil || r.off >= len(r.b) }

func (r *reader) u8() uint8 {
	if r.off >= len(r.b) {
		r.fail("byte")
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// uint reads an n-byte integer in the reader's byte order.
func (r *reader) uint(n int) uint64 {
	if n < 0 || len(r.b)-r.off < n {
		r.fail("integer")
		return 0
	}
	var v uint64
	if r.be {
		for i := 0; i < n; i++ {
			v = v<<8 | uint64(r.b[r.off+i])
		}
	} else {
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(r.b[r.off+i])
		}
	}
	r.off += n
	return v
}

func (r *reader) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(b&0x7f) << shift
		}
		if b&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	var b uint8
	for {
		b = r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(b&0x7f) << shift
		}
		shift += 7
		if b&0x80 == 0 {
			break
		}
	}
	if shift < 64 && b&0x40 != 0 {
		v |= -1 << shift
	}
	return v
}

// block reads a ULEB128 length and that many bytes (a DWARF expression).
func (r *reader) block() []byte {
	n := r.uleb()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("expression block")
		return nil
	}
	b := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b
}
