package perfevent

import (
	"encoding/binary"
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

var le = binary.LittleEndian

// rec builds a record: header then the given body words/bytes, padded to 8.
type recBuilder struct{ b []byte }

func newRec(typ uint32, misc uint16) *recBuilder {
	r := &recBuilder{b: make([]byte, 8)}
	le.PutUint32(r.b, typ)
	le.PutUint16(r.b[4:], misc)
	return r
}
func (r *recBuilder) u64(v uint64) *recBuilder { r.b = le.AppendUint64(r.b, v); return r }
func (r *recBuilder) u32(v uint32) *recBuilder { r.b = le.AppendUint32(r.b, v); return r }
func (r *recBuilder) str(s string) *recBuilder {
	r.b = append(r.b, s...)
	r.b = append(r.b, 0)
	for len(r.b)%8 != 0 {
		r.b = append(r.b, 0)
	}
	return r
}
func (r *recBuilder) raw(b []byte) *recBuilder { r.b = append(r.b, b...); return r }
func (r *recBuilder) done() []byte {
	le.PutUint16(r.b[6:], uint16(len(r.b)))
	return r.b
}

func testFormat() *Format {
	return &Format{
		SampleType:  SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleRegsUser | SampleStackUser,
		RegsMask:    layoutAMD64.Mask,
		SampleIDAll: true,
		Order:       le,
	}
}

// sampleRecord is a PERF_RECORD_SAMPLE of testFormat with register values
// 100+i and a stack window of size bytes of which dyn were copied.
func sampleRecord(size, dyn uint64) []byte {
	r := newRec(RecordSample, 0).u32(10).u32(11).u64(5000).u32(1).u32(0).u64(1001001)
	r.u64(2) // PERF_SAMPLE_REGS_ABI_64
	for i := 0; i < layoutAMD64.NumRegs(); i++ {
		r.u64(uint64(100 + i))
	}
	r.u64(size)
	if size > 0 {
		st := make([]byte, size)
		for i := range st {
			st[i] = byte(i)
		}
		r.raw(st).u64(dyn)
	}
	return r.done()
}

func TestParseSample(t *testing.T) {
	f := testFormat()
	var rec Record
	if err := f.ParseRecord(sampleRecord(64, 40), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.PID != 10 || rec.TID != 11 || rec.Time != 5000 || rec.CPU != 1 || rec.Period != 1001001 {
		t.Errorf("fields: %+v", rec)
	}
	if len(rec.Stack) != 40 || rec.StackLen != 64 || rec.Stack[39] != 39 {
		t.Errorf("stack: len %d size %d", len(rec.Stack), rec.StackLen)
	}
	var s regs.Set
	if err := layoutAMD64.Fill(rec.Regs[:rec.NumRegs], &s); err != nil {
		t.Fatal(err)
	}
	// Mask bits in order: AX0 BX1 CX2 DX3 SI4 DI5 BP6 SP7 IP8 R8..R15 16-23,
	// so values 100.. go AX=100, BX=101, CX=102, DX=103, SI, DI, BP=106,
	// SP=107, IP=108, R8=109 ... R15=116.
	want := map[int]uint64{0: 100, 3: 101, 2: 102, 1: 103, 4: 104, 5: 105, 6: 106, 7: 107, 8: 109, 15: 116, 16: 108}
	for d, v := range want {
		if got, ok := s.Get(d); !ok || got != v {
			t.Errorf("DWARF %d = %d,%v; want %d", d, got, ok, v)
		}
	}
	if s.PC != 108 || s.SP() != 107 || s.FP() != 106 {
		t.Errorf("PC %d SP %d FP %d", s.PC, s.SP(), s.FP())
	}
}

func TestParseSideBand(t *testing.T) {
	f := testFormat()
	sid := func(r *recBuilder) *recBuilder { return r.u32(10).u32(12).u64(777).u32(0).u32(0) }
	var rec Record

	if err := f.ParseRecord(sid(newRec(RecordLost, 0).u64(1).u64(42)).done(), &rec); err != nil || rec.Lost != 42 || rec.Time != 777 {
		t.Errorf("LOST: %v %+v", err, rec)
	}
	if err := f.ParseRecord(sid(newRec(RecordComm, miscCommExec).u32(10).u32(10).str("newprog")).done(), &rec); err != nil || !rec.Exec || string(rec.Comm) != "newprog" || rec.Time != 777 {
		t.Errorf("COMM: %v %+v", err, rec)
	}
	// FORK: the body names the new thread (13) and its creator (10); the
	// trailer names the task that was current, the creator's thread (12):
	// it must not replace the new thread.
	if err := f.ParseRecord(sid(newRec(RecordFork, 0).u32(10).u32(10).u32(13).u32(10).u64(5)).done(), &rec); err != nil || rec.TID != 13 || rec.PTID != 10 || rec.Time != 777 {
		t.Errorf("FORK: %v %+v", err, rec)
	}
	if err := f.ParseRecord(sid(newRec(RecordLost, 0).u64(1).u64(42)).done(), &rec); err != nil || rec.TID != 12 {
		t.Errorf("LOST takes its thread from the trailer: %v %+v", err, rec)
	}
	mm := newRec(RecordMmap2, 0).u32(10).u32(10).u64(0x7f0000).u64(0x1000).u64(0).raw(make([]byte, 24)).u32(5).u32(2).str("/usr/lib/libx.so")
	if err := f.ParseRecord(sid(mm).done(), &rec); err != nil || rec.Addr != 0x7f0000 || !rec.Executable() || string(rec.Filename) != "/usr/lib/libx.so" {
		t.Errorf("MMAP2: %v %+v", err, rec)
	}
	if err := f.ParseRecord(sid(newRec(RecordThrottle, 0).u64(9).u64(1).u64(1)).done(), &rec); err != nil {
		t.Errorf("THROTTLE: %v", err)
	}
	if err := f.ParseRecord(newRec(99, 0).u64(1).done(), &rec); err != nil || rec.Type != 99 {
		t.Errorf("unknown type: %v %+v", err, rec)
	}
}

func TestParseErrors(t *testing.T) {
	f := testFormat()
	good := sampleRecord(64, 40)
	cases := map[string][]byte{
		"short":     good[:5],
		"size<8":    func() []byte { b := append([]byte(nil), good...); le.PutUint16(b[6:], 4); return b }(),
		"size>len":  good[:len(good)-8],
		"truncated": func() []byte { b := append([]byte(nil), good[:100]...); le.PutUint16(b[6:], 100); return b }(),
		"dyn>size":  sampleRecord(64, 65),
		"comm no NUL": func() []byte {
			r := newRec(RecordComm, 0).u32(1).u32(1).raw([]byte("abcdefgh"))
			return r.done()
		}(),
	}
	for name, b := range cases {
		var rec Record
		err := f.ParseRecord(b, &rec)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a *FormatError", name, err)
			continue
		}
		if fe.Off < 0 || fe.Off > len(b) {
			t.Errorf("%s: offset %d outside the record", name, fe.Off)
		}
	}
	bad := *f
	bad.SampleType |= 1 << 5 // PERF_SAMPLE_CALLCHAIN... ADDR: unknown to the parser
	var rec Record
	if err := bad.ParseRecord(good, &rec); err == nil {
		t.Error("a sample_type with unknown fields parsed")
	}
}

func TestLayouts(t *testing.T) {
	for _, arch := range []regs.Arch{regs.AMD64, regs.ARM64, regs.S390X} {
		l, ok := Layout(arch)
		if !ok {
			t.Fatalf("%v: no layout", arch)
		}
		vals := make([]uint64, l.NumRegs())
		for i := range vals {
			vals[i] = uint64(1000 + i)
		}
		var s regs.Set
		if err := l.Fill(vals, &s); err != nil {
			t.Fatal(err)
		}
		if s.Arch != arch || s.PC == 0 || s.SP() == 0 || s.FP() == 0 {
			t.Errorf("%v: PC %d SP %d FP %d", arch, s.PC, s.SP(), s.FP())
		}
		if l.Fill(vals[1:], &s) == nil {
			t.Errorf("%v: short register list accepted", arch)
		}
	}
	// arm64: 33 registers, x0..x30 and sp keep their numbers, pc is bit 32.
	l, _ := Layout(regs.ARM64)
	vals := make([]uint64, 33)
	for i := range vals {
		vals[i] = uint64(i)
	}
	var s regs.Set
	l.Fill(vals, &s)
	if s.PC != 32 || s.SP() != 31 || s.R[regs.ARM64LR] != 30 {
		t.Errorf("arm64: PC %d SP %d LR %d", s.PC, s.SP(), s.R[regs.ARM64LR])
	}
	// s390x: 33 registers (r0-r15, f0-f15, pc; not the PSW mask), so
	// the pc is value 32; f1 (perf 17) is DWARF 20, f2 (perf 18) DWARF 17.
	l, _ = Layout(regs.S390X)
	vals = make([]uint64, 33)
	for i := range vals {
		vals[i] = uint64(i)
	}
	if err := l.Fill(vals, &s); err != nil {
		t.Fatal(err)
	}
	if s.PC != 32 || s.SP() != 15 || s.R[20] != 17 || s.R[17] != 18 {
		t.Errorf("s390x: PC %d SP %d DWARF20 %d DWARF17 %d", s.PC, s.SP(), s.R[20], s.R[17])
	}
	if _, ok := s.Get(32); ok {
		t.Error("s390x PSW mask landed in a DWARF register")
	}
}

func TestRingWrap(t *testing.T) {
	data := make([]byte, 256)
	var head, tail uint64
	r, err := NewRing(data, &head, &tail, le)
	if err != nil {
		t.Fatal(err)
	}
	// Write records of 48 bytes at increasing positions so that one
	// straddles the end of the 256-byte ring.
	put := func(pos uint64, rec []byte) {
		for i, c := range rec {
			data[(pos+uint64(i))%256] = c
		}
	}
	f := &Format{Order: le, SampleIDAll: false}
	var pos uint64 = 200 // start near the end: the first record wraps
	head, tail = pos, pos
	r.pos = pos
	for i := 0; i < 3; i++ {
		rec := newRec(RecordLost, 0).u64(uint64(i)).u64(uint64(10 + i)).raw(make([]byte, 24)).done()
		put(head, rec)
		head += uint64(len(rec))
	}
	if n := r.Begin(); n != 3*48 {
		t.Fatalf("Begin: %d bytes", n)
	}
	var lost []uint64
	for {
		b, _, ok := r.Next()
		if !ok {
			break
		}
		var rec Record
		if err := f.ParseRecord(b, &rec); err != nil {
			t.Fatal(err)
		}
		lost = append(lost, rec.Lost)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lost) != 3 || lost[0] != 10 || lost[2] != 12 {
		t.Errorf("lost %v", lost)
	}
	if tail != 200 {
		t.Errorf("tail moved before Release")
	}
	r.Release()
	if tail != head {
		t.Errorf("tail %d after Release, head %d", tail, head)
	}

	// A corrupt header (size 0) is an error carrying the position, and
	// the ring skips to the head.
	put(head, make([]byte, 8))
	head += 16
	r.Begin()
	if _, _, ok := r.Next(); ok {
		t.Error("a zero-size record was returned")
	}
	var fe *FormatError
	if err := r.Err(); !errors.As(err, &fe) || fe.Pos != head-16 {
		t.Errorf("Err = %v", err)
	}
	r.Release()
	if tail != head {
		t.Error("ring did not skip to the head after a bad record")
	}
	// A head more than a ring ahead is refused.
	head += 1000
	if n := r.Begin(); n != 0 || r.Err() == nil {
		t.Error("head a ring ahead accepted")
	}
	if _, err := NewRing(make([]byte, 100), &head, &tail, nil); err == nil {
		t.Error("a ring of 100 bytes accepted")
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := ParseCPUList("0-2,5,7-8\n")
	if err != nil || len(got) != 6 || got[3] != 5 || got[5] != 8 {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "-1", "0,,1"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
