package perfevent

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

// A Ring reads the data area of one perf ring buffer.
//
// The kernel is the producer: it writes records at data_head and then
// publishes the new head (with a store-release, smp_store_release); stacktop
// is the consumer. The rules (include/uapi/linux/perf_event.h) are: load
// data_head with acquire semantics before reading the bytes it covers, and
// store data_tail only after the bytes before it have been read, so the
// kernel never overwrites a record still in use. In Go, sync/atomic loads
// and stores are sequentially consistent, which is at least acquire and
// release.
//
// A record may straddle the end of the data area; it is copied into a
// scratch buffer so the caller always sees it contiguous. All other records
// are returned in place, valid until the tail is moved past them.
type Ring struct {
	data  []byte  // power-of-two bytes
	head  *uint64 // data_head, written by the kernel
	tail  *uint64 // data_tail, written by us
	order binary.ByteOrder

	pos     uint64 // next record to read (not yet published as tail)
	limit   uint64 // head seen at Begin
	scratch []byte
	err     error
}

// NewRing returns a reader over data (whose length must be a power of two)
// with the given head and tail words: in a live ring, data_head and
// data_tail of the mapped struct perf_event_mmap_page.
func NewRing(data []byte, head, tail *uint64, order binary.ByteOrder) (*Ring, error) {
	if len(data) == 0 || len(data)&(len(data)-1) != 0 {
		return nil, fmt.Errorf("perfevent: ring data of %d bytes is not a power of two", len(data))
	}
	if order == nil {
		order = binary.NativeEndian
	}
	return &Ring{data: data, head: head, tail: tail, order: order, pos: atomic.LoadUint64(tail)}, nil
}

// Begin snapshots data_head: Next returns the records written before it.
// It returns the number of unread bytes.
func (r *Ring) Begin() uint64 {
	r.limit = atomic.LoadUint64(r.head) // acquire
	if r.limit-r.pos > uint64(len(r.data)) {
		// A head more than a ring ahead of the tail (or behind it)
		// cannot be: the kernel never overwrites unread data. Skip
		// everything rather than read garbage.
		r.err = &FormatError{Pos: r.pos, Msg: fmt.Sprintf("data_head %d is %d bytes past data_tail, ring holds %d", r.limit, r.limit-r.pos, len(r.data))}
		r.pos = r.limit
		r.Release()
		return 0
	}
	return r.limit - r.pos
}

// Next returns the next record (header included) before the head that
// Begin saw, and its position in the ring's byte stream; ok is false at the
// end or after a malformed header (see Err). The bytes are valid until
// Release (or the next call of Next for a record that wrapped).
func (r *Ring) Next() (rec []byte, pos uint64, ok bool) {
	if r.err != nil || r.pos == r.limit {
		return nil, r.pos, false
	}
	left := r.limit - r.pos
	size := uint64(len(r.data))
	mask := size - 1
	if left < headerSize {
		return r.bad(fmt.Sprintf("%d bytes before data_head, shorter than a header", left))
	}
	var hdr [headerSize]byte
	off := r.pos & mask
	n := copy(hdr[:], r.data[off:])
	copy(hdr[n:], r.data)
	recSize := uint64(r.order.Uint16(hdr[6:]))
	if recSize < headerSize || recSize > left {
		return r.bad(fmt.Sprintf("record size %d outside [%d, %d]", recSize, headerSize, left))
	}
	pos = r.pos
	r.pos += recSize
	if off+recSize <= size {
		return r.data[off : off+recSize], pos, true
	}
	if cap(r.scratch) < int(recSize) {
		r.scratch = make([]byte, recSize)
	}
	s := r.scratch[:recSize]
	n = copy(s, r.data[off:])
	copy(s[n:], r.data)
	return s, pos, true
}

func (r *Ring) bad(msg string) ([]byte, uint64, bool) {
	r.err = &FormatError{Pos: r.pos, Msg: msg}
	// Resynchronise at the head: the records between are unreadable.
	r.pos = r.limit
	return nil, r.pos, false
}

// Release publishes the tail up to the records returned so far: the kernel
// may overwrite them from now on.
func (r *Ring) Release() {
	atomic.StoreUint64(r.tail, r.pos) // release
}

// Err returns the first malformed data the ring met and clears it. The
// ring skips to the head after an error, so reading can go on.
func (r *Ring) Err() error {
	err := r.err
	r.err = nil
	return err
}
