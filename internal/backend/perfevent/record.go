package perfevent

import (
	"encoding/binary"
	"fmt"
)

// Record types (struct perf_event_header.type) this package parses; the
// values are the kernel's PERF_RECORD_*.
const (
	RecordMmap        = 1
	RecordLost        = 2
	RecordComm        = 3
	RecordExit        = 4
	RecordThrottle    = 5
	RecordUnthrottle  = 6
	RecordFork        = 7
	RecordSample      = 9
	RecordMmap2       = 10
	RecordLostSamples = 13
)

// Header misc bits.
const (
	miscCommExec    = 1 << 13 // PERF_RECORD_MISC_COMM_EXEC
	miscMmapBuildID = 1 << 14 // PERF_RECORD_MISC_MMAP_BUILD_ID
)

// Sample type bits (PERF_SAMPLE_*) the parser understands. A Format with
// any other bit set is refused: the layout of the fields after it would be
// unknown.
const (
	SampleIP         = 1 << 0
	SampleTID        = 1 << 1
	SampleTime       = 1 << 2
	SampleID         = 1 << 6
	SampleCPU        = 1 << 7
	SamplePeriod     = 1 << 8
	SampleStreamID   = 1 << 9
	SampleRegsUser   = 1 << 12
	SampleStackUser  = 1 << 13
	SampleIdentifier = 1 << 16

	supportedSample = SampleIP | SampleTID | SampleTime | SampleID | SampleCPU |
		SamplePeriod | SampleStreamID | SampleRegsUser | SampleStackUser | SampleIdentifier
)

// headerSize is sizeof(struct perf_event_header).
const headerSize = 8

// Format is what the parser must know of the event's attributes to lay out
// a record: the same sample_type, sample_regs_user and sample_id_all the
// event was opened with, and the byte order of the kernel that wrote the
// records (the host's, for a live ring).
type Format struct {
	SampleType  uint64
	RegsMask    uint64
	SampleIDAll bool
	Order       binary.ByteOrder
}

// FormatError reports a record that does not parse: its type, the byte
// offset within the record where parsing failed, and what was wrong. Pos is
// the record's position in the ring's byte stream (its data_tail value)
// when the error comes from a Ring, else 0.
type FormatError struct {
	Pos  uint64
	Type uint32
	Off  int
	Msg  string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("perfevent: record type %d at ring position %d, offset %d: %s", e.Type, e.Pos, e.Off, e.Msg)
}

// A Record is one parsed perf record. Only the fields of its Type are set;
// byte slices (Stack, Comm, Filename) point into the parsed bytes.
type Record struct {
	Type uint32
	Misc uint16
	Size int // bytes, header included

	// PID and TID come from a sample, the body of COMM/FORK/EXIT/MMAP2
	// (for FORK and EXIT the new or ending thread), or the sample_id
	// trailer of other records. Time is the sample_id's when there is one.
	PID, TID uint32
	Time     uint64
	CPU      uint32

	// PERF_RECORD_SAMPLE.
	IP       uint64
	Period   uint64
	RegsABI  uint64 // PERF_SAMPLE_REGS_ABI_*: 0 when no user registers (kernel thread)
	NumRegs  int
	Regs     [64]uint64
	StackLen uint64 // the window asked for (the "size" field), before dyn_size
	Stack    []byte // the bytes the kernel could copy (dyn_size of them)

	// PERF_RECORD_LOST and PERF_RECORD_LOST_SAMPLES.
	Lost uint64

	// PERF_RECORD_COMM.
	Comm []byte
	// Exec is set for a COMM record that an execve wrote.
	Exec bool

	// PERF_RECORD_FORK and PERF_RECORD_EXIT.
	PPID, PTID uint32

	// PERF_RECORD_MMAP2 (and MMAP).
	Addr, Len, PgOff uint64
	Prot, Flags      uint32
	Filename         []byte
}

// Executable reports whether an MMAP2 record maps executable memory.
func (r *Record) Executable() bool { return r.Prot&0x4 != 0 } // PROT_EXEC

// reader is a sticky-error reader over one record: once a read fails every
// later read returns zero and the first error stays.
type reader struct {
	b     []byte
	off   int
	order binary.ByteOrder
	typ   uint32
	err   error
}

func (r *reader) fail(msg string, args ...any) {
	if r.err == nil {
		r.err = &FormatError{Type: r.typ, Off: r.off, Msg: fmt.Sprintf(msg, args...)}
	}
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("need %d bytes, %d left", n, len(r.b)-r.off)
		return nil
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

func (r *reader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return r.order.Uint64(b)
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return r.order.Uint32(b)
}

// cstring reads a NUL-terminated string padded to 8 bytes and returns it
// without the NUL.
func (r *reader) cstring(before int) []byte {
	if r.err != nil {
		return nil
	}
	end := len(r.b) - before
	if end < r.off {
		r.fail("no room for a string")
		return nil
	}
	for i := r.off; i < end; i++ {
		if r.b[i] == 0 {
			s := r.b[r.off:i]
			n := (i + 1 - r.off + 7) &^ 7
			if n > end-r.off {
				r.fail("string padding runs past the record")
				return nil
			}
			r.off += n
			return s
		}
	}
	r.fail("string without NUL")
	return nil
}

// sampleIDSize is the size of the struct sample_id trailer that
// sample_id_all appends to non-sample records.
func (f *Format) sampleIDSize() int {
	if !f.SampleIDAll {
		return 0
	}
	n := 0
	for _, bit := range []uint64{SampleTID, SampleTime, SampleID, SampleStreamID, SampleCPU, SampleIdentifier} {
		if f.SampleType&bit != 0 {
			n += 8
		}
	}
	return n
}

// readSampleID reads the sample_id trailer. Its pid/tid are those of the
// task that was current when the kernel wrote the record (the parent, for
// a FORK record), so they fill rec.PID/TID only for records whose body has
// none (ownTask false).
func (f *Format) readSampleID(r *reader, rec *Record, ownTask bool) {
	if !f.SampleIDAll {
		return
	}
	if f.SampleType&SampleTID != 0 {
		pid, tid := r.u32(), r.u32()
		if !ownTask {
			rec.PID, rec.TID = pid, tid
		}
	}
	if f.SampleType&SampleTime != 0 {
		rec.Time = r.u64()
	}
	if f.SampleType&SampleID != 0 {
		r.u64()
	}
	if f.SampleType&SampleStreamID != 0 {
		r.u64()
	}
	if f.SampleType&SampleCPU != 0 {
		rec.CPU = r.u32()
		r.u32()
	}
	if f.SampleType&SampleIdentifier != 0 {
		r.u64()
	}
}

// ParseRecord parses one record (header included) into rec. Unknown record
// types are not an error: rec.Type says which it was and nothing else is
// set. Slices in rec point into b.
func (f *Format) ParseRecord(b []byte, rec *Record) error {
	order := f.Order
	if order == nil {
		order = binary.NativeEndian
	}
	*rec = Record{}
	if len(b) < headerSize {
		return &FormatError{Off: 0, Msg: fmt.Sprintf("%d bytes, shorter than a header", len(b))}
	}
	rec.Type = order.Uint32(b)
	rec.Misc = order.Uint16(b[4:])
	rec.Size = int(order.Uint16(b[6:]))
	if rec.Size < headerSize || rec.Size > len(b) {
		return &FormatError{Type: rec.Type, Off: 6, Msg: fmt.Sprintf("size %d outside [%d, %d]", rec.Size, headerSize, len(b))}
	}
	if f.SampleType&^supportedSample != 0 {
		return &FormatError{Type: rec.Type, Msg: fmt.Sprintf("sample_type %#x has fields this parser does not know", f.SampleType&^supportedSample)}
	}
	r := &reader{b: b[:rec.Size], off: headerSize, order: order, typ: rec.Type}
	switch rec.Type {
	case RecordSample:
		f.parseSample(r, rec)
	case RecordLost:
		r.u64() // id
		rec.Lost = r.u64()
		f.readSampleID(r, rec, false)
	case RecordLostSamples:
		rec.Lost = r.u64()
		f.readSampleID(r, rec, false)
	case RecordComm:
		rec.PID, rec.TID = r.u32(), r.u32()
		rec.Comm = r.cstring(f.sampleIDSize())
		rec.Exec = rec.Misc&miscCommExec != 0
		f.readSampleID(r, rec, true)
	case RecordFork, RecordExit:
		rec.PID, rec.PPID = r.u32(), r.u32()
		rec.TID, rec.PTID = r.u32(), r.u32()
		rec.Time = r.u64()
		f.readSampleID(r, rec, true)
	case RecordThrottle, RecordUnthrottle:
		rec.Time = r.u64()
		r.u64() // id
		r.u64() // stream_id
		f.readSampleID(r, rec, false)
	case RecordMmap, RecordMmap2:
		rec.PID, rec.TID = r.u32(), r.u32()
		rec.Addr, rec.Len, rec.PgOff = r.u64(), r.u64(), r.u64()
		if rec.Type == RecordMmap2 {
			r.bytes(24) // maj, min, ino, ino_generation; or build ID
			rec.Prot, rec.Flags = r.u32(), r.u32()
		} else {
			rec.Prot = 0x4 // PERF_RECORD_MMAP is only written for executable maps
		}
		rec.Filename = r.cstring(f.sampleIDSize())
		f.readSampleID(r, rec, true)
	default:
		return nil
	}
	return r.err
}

func (f *Format) parseSample(r *reader, rec *Record) {
	st := f.SampleType
	if st&SampleIdentifier != 0 {
		r.u64()
	}
	if st&SampleIP != 0 {
		rec.IP = r.u64()
	}
	if st&SampleTID != 0 {
		rec.PID, rec.TID = r.u32(), r.u32()
	}
	if st&SampleTime != 0 {
		rec.Time = r.u64()
	}
	if st&SampleID != 0 {
		r.u64()
	}
	if st&SampleStreamID != 0 {
		r.u64()
	}
	if st&SampleCPU != 0 {
		rec.CPU = r.u32()
		r.u32()
	}
	if st&SamplePeriod != 0 {
		rec.Period = r.u64()
	}
	if st&SampleRegsUser != 0 {
		rec.RegsABI = r.u64()
		if rec.RegsABI != 0 {
			n := 0
			for m := f.RegsMask; m != 0; m &= m - 1 {
				n++
			}
			for i := 0; i < n; i++ {
				rec.Regs[i] = r.u64()
			}
			rec.NumRegs = n
		}
	}
	if st&SampleStackUser != 0 {
		start := r.off
		rec.StackLen = r.u64()
		if rec.StackLen != 0 {
			data := r.bytes(rec.StackLen)
			dyn := r.u64()
			if r.err == nil && dyn > rec.StackLen {
				r.off -= 8
				r.fail("stack dyn_size %d larger than its size %d (field at %d)", dyn, rec.StackLen, start)
			}
			if r.err == nil {
				rec.Stack = data[:dyn]
			}
		}
	}
}
