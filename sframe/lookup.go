package sframe

import (
	"encoding/binary"
	"fmt"
)

// funcAt decodes FDE i after a range check.
func (s *Section) funcAt(i int) (Func, error) {
	if i < 0 || i >= int(s.hdr.NumFDEs) {
		return Func{}, fmt.Errorf("sframe: function index %d out of range [0,%d)", i, s.hdr.NumFDEs)
	}
	return s.decodeFDE(i), nil
}

// find returns the table index of the FDE whose range holds pc: the last FDE
// (by start address) with start <= pc, if pc is below its end.
// walkFREs returns the section offset of f's last FRE whose start is at or
// below off. It is the hot loop of every lookup, so it reads the headers
// straight from the bytes: Parse validated every FRE of every FDE, and the
// one guard per step only keeps a wrong caller from reading out of range.
func (s *Section) walkFREs(f *Func, off uint64) (best uint64, found bool, err error) {
	data := s.data
	end := s.freEnd
	if end > uint64(len(data)) {
		end = uint64(len(data))
	}
	as := uint64(1) << (f.FREType & 3)
	pos := uint64(f.freStart)
	for j := uint32(0); j < f.NumFREs; j++ {
		if pos+as+1 > end || f.FREType > 2 {
			return 0, false, formatErr(pos, "FDE %d FRE %d is corrupt", f.Index, j)
		}
		var start uint64
		switch {
		case as == 1:
			start = uint64(data[pos])
		case as == 2 && s.be:
			start = uint64(binary.BigEndian.Uint16(data[pos:]))
		case as == 2:
			start = uint64(binary.LittleEndian.Uint16(data[pos:]))
		case s.be:
			start = uint64(binary.BigEndian.Uint32(data[pos:]))
		default:
			start = uint64(binary.LittleEndian.Uint32(data[pos:]))
		}
		if start > off {
			break
		}
		info := data[pos+as]
		best, found = pos, true
		pos += as + 1 + uint64(info>>1&0xf)<<(info>>5&3)
	}
	return best, found, nil
}

// lastAtOrBelow returns the index of the last element of the ascending,
// non-empty a that is <= v, given a[0] <= v.
func lastAtOrBelow(a []uint64, v uint64) int {
	base, n := 0, len(a)
	for n > 1 {
		half := n >> 1
		if a[base+half] <= v {
			base += half
		}
		n -= half
	}
	return base
}

// find returns the address-order position (an index into s.funcs) of the
// function whose range holds pc.
func (s *Section) find(pc uint64) (int, bool) {
	// Search the computed absolute starts: under PCREL the raw values
	// shrink as the fields' own addresses grow, so only the sum is ordered.
	starts := s.starts
	if len(starts) == 0 || starts[0] > pc {
		return 0, false
	}
	// Last block whose first start is <= pc, then the last start <= pc in
	// it. Branch-free halving: the comparison outcome is unpredictable, so
	// a mispredicted branch per step would dominate the search.
	blk := lastAtOrBelow(s.top, pc)
	lo := blk * topStride
	hi := min(lo+topStride, len(starts))
	base := lo + lastAtOrBelow(starts[lo:hi], pc)
	if pc-starts[base] >= uint64(s.funcs[base].Size) {
		return 0, false // a gap, past the end, or a size-0 FDE
	}
	return base, true
}

// sorted maps a position in address order to a table index.
func (s *Section) sorted(k int) int {
	if s.order == nil {
		return k
	}
	return int(s.order[k])
}

func (s *Section) lookup(pc uint64, r *Row) error {
	k, ok := s.find(pc)
	if !ok {
		return ErrNoFunc
	}
	f := &s.funcs[k]
	off := pc - f.Start
	if f.PCType == PCMask {
		off %= s.blockSize(f) // the function-relative offset, as libsframe 2.46 and the kernel do
	}
	// FREs are variable-length: walk their headers, keep the last whose
	// start is <= off, and decode only that one.
	best, found, err := s.walkFREs(f, off)
	if err != nil {
		return err
	}
	if !found {
		return ErrNoRow
	}
	var fre rawFRE
	if _, err := s.readFRE(f, best, &fre); err != nil {
		return err
	}
	return s.normaliseInto(f, &fre, r)
}

func (s *Section) rows(f Func) ([]Row, error) {
	// Re-decode by index: the private FRE offset of a caller-built Func
	// cannot be trusted.
	fd, err := s.funcAt(f.Index)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, fd.NumFREs)
	pos := uint64(fd.freStart)
	for j := uint32(0); j < fd.NumFREs; j++ {
		var fre rawFRE
		next, err := s.readFRE(&fd, pos, &fre)
		if err != nil {
			return nil, err
		}
		r, err := s.normalise(&fd, &fre)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
		pos = next
	}
	return rows, nil
}

// normalise turns a stored FRE into the version- and ABI-neutral Row.
func (s *Section) normalise(f *Func, fre *rawFRE) (Row, error) {
	var r Row
	err := s.normaliseInto(f, fre, &r)
	return r, err
}

// normaliseInto fills r, which Lookup's caller owns: a Row is about 90
// bytes, and returning it by value through each layer copied it each time.
func (s *Section) normaliseInto(f *Func, fre *rawFRE, r *Row) error {
	*r = Row{
		Start:     uint64(fre.start),
		MangledRA: fre.info>>7 != 0,
		Signal:    f.Signal,
	}
	if f.PCType == PCInc {
		r.Start += f.Start
	}
	if fre.n == 0 {
		r.Outermost = true // RA undefined: gas writes info 0 for .cfi_undefined RA
		return nil
	}
	if f.FDEType == FDETypeFlex {
		return s.normaliseFlex(f, fre, r)
	}
	return s.normaliseDefault(f, fre, r)
}

// cfaOffset decodes a CFA offset word (encoded on s390x).
func (s *Section) cfaOffset(w int64) int64 {
	if s.hdr.ABI == ABIS390XBigEndian {
		return w*8 + s390xCFABias
	}
	return w
}

func (s *Section) fixed(off int8) Rule {
	return Rule{Kind: RuleCFA, Offset: int64(off), Deref: true, Fixed: true}
}

// normaliseDefault handles V1/V2 FREs and V3 default FDEs: words are CFA,
// then RA unless the header fixes it, then FP unless the header fixes it.
func (s *Section) normaliseDefault(f *Func, fre *rawFRE, r *Row) error {
	fixRA, fixFP := s.hdr.CFAFixedRAOffset, s.hdr.CFAFixedFPOffset
	max := uint8(1)
	if fixRA == 0 {
		max++
	}
	if fixFP == 0 {
		max++
	}
	if fre.n > max {
		return formatErr(fre.off, "FDE %d FRE has %d data words, the ABI's default layout holds %d", f.Index, fre.n, max)
	}
	word := func(k int) int64 { return signExtend(fre.words[k], fre.size) }
	r.CFA = Rule{Kind: RuleReg, Reg: s.fpReg, Offset: s.cfaOffset(word(0))}
	if fre.info&1 != 0 {
		r.CFA.Reg = s.spReg
	}
	k := 1
	// V2 s390x: an odd RA/FP word is (DWARF regnum << 1) | 1, the value
	// lives in that register. V3 expresses this with flex FDEs instead.
	regWord := s.hdr.ABI == ABIS390XBigEndian && s.hdr.Version == 2
	saved := func(w int64, what string) (Rule, error) {
		if regWord && w&1 != 0 {
			if w < 0 || w>>1 > 0xffff {
				return Rule{}, formatErr(fre.off, "FDE %d FRE %s register word %d invalid", f.Index, what, w)
			}
			return Rule{Kind: RuleReg, Reg: uint16(w >> 1)}, nil
		}
		return Rule{Kind: RuleCFA, Offset: w, Deref: true}, nil
	}
	var err error
	switch {
	case fixRA != 0:
		r.RA = s.fixed(fixRA)
	case k < int(fre.n):
		w := word(k)
		k++
		if w == 0 {
			// RA padding (SFRAME_FRE_RA_OFFSET_INVALID): an FP word follows
			// while the RA is still in its register (s390x).
			r.RA = Rule{Kind: RuleSame, Padding: true}
		} else if r.RA, err = saved(w, "RA"); err != nil {
			return err
		}
	default:
		r.RA = Rule{Kind: RuleSame}
	}
	switch {
	case fixFP != 0:
		r.FP = s.fixed(fixFP)
	case k < int(fre.n):
		if r.FP, err = saved(word(k), "FP"); err != nil {
			return err
		}
	default:
		r.FP = Rule{Kind: RuleSame}
	}
	return nil
}

// Flex control word bits (V3 SFRAME_FDE_TYPE_FLEX).
const (
	ctlRegP   = 0x1
	ctlDerefP = 0x2
)

// normaliseFlex handles V3 flexible FDEs: [cfa_ctl cfa_off] [ra_ctl ra_off
// | 0 padding] [fp_ctl fp_off], every trailing part optional.
func (s *Section) normaliseFlex(f *Func, fre *rawFRE, r *Row) error {
	if fre.n < 2 {
		return formatErr(fre.off, "FDE %d flex FRE has %d data word, needs a CFA control and offset", f.Index, fre.n)
	}
	n := int(fre.n)
	off := func(k int) int64 { return signExtend(fre.words[k], fre.size) }
	ctlRule := func(ctl uint32, o int64, what string) (Rule, error) {
		if ctl&uint32(infoReserved) != 0 {
			return Rule{}, formatErr(fre.off, "FDE %d flex FRE %s control word %#x has the reserved bit set", f.Index, what, ctl)
		}
		reg := ctl >> 3
		if reg > 0xffff {
			return Rule{}, formatErr(fre.off, "FDE %d flex FRE %s register %d out of range", f.Index, what, reg)
		}
		if ctl&ctlRegP != 0 {
			return Rule{Kind: RuleReg, Reg: uint16(reg), Offset: o, Deref: ctl&ctlDerefP != 0}, nil
		}
		if reg != 0 || ctl&ctlDerefP == 0 {
			// Without reg_p only the stack slot *(CFA+off) is meaningful;
			// a value rule "CFA+off" cannot be expressed for RA or FP.
			return Rule{}, formatErr(fre.off, "FDE %d flex FRE %s control word %#x invalid", f.Index, what, ctl)
		}
		return Rule{Kind: RuleCFA, Offset: o, Deref: true}, nil
	}
	cfaCtl := fre.words[0]
	if cfaCtl&ctlRegP == 0 {
		return formatErr(fre.off, "FDE %d flex FRE CFA control word %#x names no register", f.Index, cfaCtl)
	}
	var err error
	if r.CFA, err = ctlRule(cfaCtl, s.cfaOffset(off(1)), "CFA"); err != nil {
		return err
	}
	k := 2
	absent := func(fix int8) Rule {
		if fix != 0 {
			return s.fixed(fix)
		}
		return Rule{Kind: RuleSame}
	}
	r.RA = absent(s.hdr.CFAFixedRAOffset)
	if k < n {
		if fre.words[k] == 0 {
			// A single padding word: no RA rule, an FP rule follows. The
			// kernel falls back to the header's fixed RA, so Kind says what
			// applies and Padding only records the encoding (readelf "U").
			r.RA.Padding = true
			k++
		} else {
			if k+1 >= n {
				return formatErr(fre.off, "FDE %d flex FRE RA control word without an offset", f.Index)
			}
			if r.RA, err = ctlRule(fre.words[k], off(k+1), "RA"); err != nil {
				return err
			}
			k += 2
		}
	}
	r.FP = absent(s.hdr.CFAFixedFPOffset)
	if k < n {
		if k+1 >= n {
			return formatErr(fre.off, "FDE %d flex FRE FP control word without an offset", f.Index)
		}
		if r.FP, err = ctlRule(fre.words[k], off(k+1), "FP"); err != nil {
			return err
		}
		k += 2
	}
	if k != n {
		return formatErr(fre.off, "FDE %d flex FRE has %d data words left over", f.Index, n-k)
	}
	return nil
}
