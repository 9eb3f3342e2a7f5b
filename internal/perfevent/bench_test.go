package perfevent

import (
	"testing"

	"stacktop/regs"
)

// BenchmarkRingParse measures what the back end spends per sample in user
// space before unwinding: reading one record of a 16 KiB stack window off
// the ring (the wrapped one copied), parsing it and filling the registers.
func BenchmarkRingParse(b *testing.B) {
	const ringSize = 1 << 20
	data := make([]byte, ringSize)
	rec := sampleRecord(DefaultWindow, DefaultWindow)
	var head, tail uint64
	r, err := NewRing(data, &head, &tail, le)
	if err != nil {
		b.Fatal(err)
	}
	f := testFormat()
	var parsed Record
	var s regs.Set
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		// The producer: one record at head (wrapping like the kernel).
		off := head % ringSize
		n := copy(data[off:], rec)
		copy(data, rec[n:])
		head += uint64(len(rec))

		r.Begin()
		raw, _, ok := r.Next()
		if !ok {
			b.Fatal(r.Err())
		}
		if err := f.ParseRecord(raw, &parsed); err != nil {
			b.Fatal(err)
		}
		if err := layoutAMD64.Fill(parsed.Regs[:parsed.NumRegs], &s); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}
