package perfevent

import (
	"encoding/binary"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// FuzzParseRecord: any bytes give a record or a *FormatError, never a panic,
// and the slices of a parsed record lie inside the input.
func FuzzParseRecord(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add(sampleRecord(64, 40), uint8(0))
	f.Add(sampleRecord(0, 0), uint8(1))
	f.Add(newRec(RecordComm, miscCommExec).u32(1).u32(1).str("x").u32(1).u32(1).u64(1).u32(0).u32(0).done(), uint8(0))
	f.Add(newRec(RecordMmap2, 0).u32(1).u32(1).u64(1).u64(1).u64(0).raw(make([]byte, 24)).u32(5).u32(2).str("/a").done(), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, variant uint8) {
		ft := testFormat()
		if variant&1 != 0 {
			ft.SampleIDAll = false
		}
		if variant&2 != 0 {
			ft.SampleType |= SampleIdentifier | SampleIP | SampleID | SampleStreamID
			ft.Order = binary.BigEndian
		}
		var rec Record
		if err := ft.ParseRecord(b, &rec); err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		if rec.Size > len(b) || len(rec.Stack) > len(b) || len(rec.Comm) > len(b) || len(rec.Filename) > len(b) {
			t.Fatalf("record larger than its bytes: %+v", rec)
		}
		if rec.NumRegs > 64 {
			t.Fatalf("%d registers", rec.NumRegs)
		}
	})
}

// FuzzRing: a ring of arbitrary bytes and head/tail positions yields
// records that each fit what was there, or an error, never a panic, and the
// tail never passes the head.
func FuzzRing(f *testing.F) {
	fuzzbudget.Limit(f)
	seed := make([]byte, 256)
	copy(seed, sampleRecord(8, 8))
	f.Add(seed, uint64(0), uint64(len(sampleRecord(8, 8))))
	f.Add(seed, uint64(250), uint64(300))
	f.Add(seed, uint64(10), uint64(5))
	f.Fuzz(func(t *testing.T, data []byte, tail, head uint64) {
		size := 1
		for size*2 <= len(data) && size < 1<<16 {
			size *= 2
		}
		if len(data) == 0 {
			return
		}
		data = data[:size]
		r, err := NewRing(data, &head, &tail, binary.LittleEndian)
		if err != nil {
			t.Fatal(err)
		}
		ft := testFormat()
		r.Begin()
		for i := 0; i < 1<<16; i++ {
			b, _, ok := r.Next()
			if !ok {
				break
			}
			if len(b) < headerSize || len(b) > size {
				t.Fatalf("record of %d bytes from a %d-byte ring", len(b), size)
			}
			var rec Record
			ft.ParseRecord(b, &rec)
		}
		r.Err()
		r.Release()
		if tail-head != 0 && head-tail > uint64(size) {
			t.Fatalf("tail %d, head %d", tail, head)
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add("0-3,8,10-11\n")
	f.Add("0")
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err == nil && len(cpus) == 0 {
			t.Fatal("no CPUs and no error")
		}
	})
}
