package sframe

import (
	"debug/elf"
	"errors"
	"io"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// FuzzParseLookup feeds arbitrary bytes through Parse and, when they parse,
// through every accessor. Parse must reject or accept without panicking;
// once accepted, nothing may fail with anything but ErrNoFunc/ErrNoRow,
// because Parse promised the whole table is sound.
func FuzzParseLookup(f *testing.F) {
	fuzzbudget.Limit(f)
	for _, b := range [][]byte{v3Example, v3FlexRAUndefined, v3FlexDRAP} {
		f.Add(b, uint64(0x2130), uint64(0x1129))
	}
	for _, tc := range encoderCases() {
		b, _ := tc.sec.encode()
		f.Add(b, tc.sec.Vaddr, tc.sec.FDEs[0].Start)
	}
	for _, path := range fixtures(f) {
		ef, err := elf.Open(path)
		if err != nil {
			continue
		}
		for _, sec := range ef.Sections {
			if sec.Name == ".sframe" {
				if b, err := io.ReadAll(sec.Open()); err == nil {
					f.Add(b, sec.Addr, sec.Addr)
				}
			}
		}
		ef.Close()
	}
	f.Fuzz(func(t *testing.T, data []byte, vaddr, pc uint64) {
		s, err := Parse(data, vaddr)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse error %T %v is not a *FormatError", err, err)
			}
			if fe.Off < 0 || fe.Off > int64(len(data)) {
				t.Fatalf("error offset %d outside the %d input bytes", fe.Off, len(data))
			}
			return
		}
		pcs := []uint64{pc, pc - 1, pc + 1, vaddr, 0, ^uint64(0)}
		for i := 0; i < s.NumFuncs() && i < 64; i++ {
			fn, err := s.Func(i)
			if err != nil {
				t.Fatalf("Func(%d): %v", i, err)
			}
			rows, err := s.Rows(fn)
			if err != nil {
				t.Fatalf("Rows(%d): %v", i, err)
			}
			if len(rows) != int(fn.NumFREs) {
				t.Fatalf("Rows(%d) = %d rows, FDE says %d", i, len(rows), fn.NumFREs)
			}
			pcs = append(pcs, fn.Start, fn.Start+uint64(fn.Size)-1, fn.Start+uint64(fn.Size))
			for _, r := range rows {
				if fn.PCType == PCInc {
					pcs = append(pcs, r.Start)
				} else {
					pcs = append(pcs, fn.Start+r.Start)
				}
			}
		}
		for _, p := range pcs {
			r, err := s.Lookup(p)
			fa, ferr := s.FuncAt(p)
			if err != nil {
				if !errors.Is(err, ErrNoFunc) {
					t.Fatalf("Lookup(%#x): %v", p, err)
				}
				if errors.Is(err, ErrNoRow) && ferr != nil {
					t.Fatalf("Lookup(%#x) found a function, FuncAt did not: %v", p, ferr)
				}
				continue
			}
			if ferr != nil {
				t.Fatalf("Lookup(%#x) found a row, FuncAt: %v", p, ferr)
			}
			if p-fa.Start >= uint64(fa.Size) {
				t.Fatalf("FuncAt(%#x) = [%#x,+%d) does not cover it", p, fa.Start, fa.Size)
			}
			if fa.PCType == PCInc && (r.Start > p || r.Start < fa.Start) {
				t.Fatalf("Lookup(%#x) row starts at %#x, outside [%#x, pc]", p, r.Start, fa.Start)
			}
		}
	})
}
