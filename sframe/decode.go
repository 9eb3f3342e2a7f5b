package sframe

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Format constants (include/sframe.h; see README.md for the version notes).
const (
	headerSize   = 28
	v3AttrSize   = 5          // sframe_func_desc_attr_v3
	maxWords     = 6          // flex: CFA pair + RA pair + FP pair
	maxSection   = 1<<32 - 1  // every offset in the format is a u32 from the header end
	s390xCFABias = 160        // s390x CFA words store (cfa_offset - 160) / 8
	v1MaskBlock  = 16         // V1 PCMASK FDEs carry no block size: assume an x86-64 PLT entry
	infoReserved = uint8(0x4) // flex control word bit 2
)

// layout is the section geometry derived once by Parse. All offsets are
// byte offsets inside the section.
type layout struct {
	be      bool
	fdeSize uint64
	fdeOff  uint64 // first FDE (V3: first index entry)
	freOff  uint64 // start of the FRE sub-section
	freEnd  uint64 // end of the FRE sub-section (trailing zero padding may follow)
	// order lists FDE indices by ascending start address. It is nil when
	// the header says the table is sorted (and Parse verified it), so the
	// common case costs nothing.
	order []uint32
	// starts holds the function start addresses in ascending order
	// (starts[k] belongs to FDE sorted(k)). Lookup binary-searches this
	// dense array instead of decoding a start field per probe: under
	// PCREL each probe would otherwise cost a multiply, a load from the
	// raw bytes and a byte-order conversion. 8 bytes per FDE.
	starts []uint64
	// funcs holds every FDE decoded once, in the same order as starts, so
	// a lookup reads its function's fields instead of decoding them from
	// the raw bytes (about 48 bytes per FDE, next to the raw ~20).
	funcs []Func
	// top holds every topStride-th start: a search first finds the block
	// in this small array (it stays in L1 cache), then searches 64 starts
	// (8 cache lines) instead of probing all over a large starts array.
	top []uint64
	// spReg/fpReg are the ABI's DWARF numbers for the default CFA bases.
	spReg, fpReg uint16
	wide         bool // V3: s64 start offsets
	pcrel        bool // starts are relative to their own field
}

func formatErr(off uint64, format string, args ...any) *FormatError {
	return &FormatError{Off: int64(off), Msg: fmt.Sprintf(format, args...)}
}

// span reports whether the n bytes at o lie inside [lo, hi).
func span(o, n, lo, hi uint64) bool { return o >= lo && o <= hi && n <= hi-o }

// The readers below return 0 for out-of-range offsets instead of panicking.
// Parse checks every range before it relies on a value, so after Parse the
// zero is unreachable; it only keeps a wrong caller from crashing the process.

func (s *Section) u8(o uint64) uint8 {
	if o >= uint64(len(s.data)) {
		return 0
	}
	return s.data[o]
}

func (s *Section) u16(o uint64) uint16 {
	if !span(o, 2, 0, uint64(len(s.data))) {
		return 0
	}
	if s.be {
		return binary.BigEndian.Uint16(s.data[o:])
	}
	return binary.LittleEndian.Uint16(s.data[o:])
}

func (s *Section) u32(o uint64) uint32 {
	if !span(o, 4, 0, uint64(len(s.data))) {
		return 0
	}
	if s.be {
		return binary.BigEndian.Uint32(s.data[o:])
	}
	return binary.LittleEndian.Uint32(s.data[o:])
}

func (s *Section) u64(o uint64) uint64 {
	if !span(o, 8, 0, uint64(len(s.data))) {
		return 0
	}
	if s.be {
		return binary.BigEndian.Uint64(s.data[o:])
	}
	return binary.LittleEndian.Uint64(s.data[o:])
}

// uword reads an unsigned data word of size 1, 2 or 4.
func (s *Section) uword(o uint64, size uint8) uint32 {
	switch size {
	case 1:
		return uint32(s.u8(o))
	case 2:
		return uint32(s.u16(o))
	}
	return s.u32(o)
}

// signExtend interprets a raw data word of size bytes as signed.
func signExtend(w uint32, size uint8) int64 {
	switch size {
	case 1:
		return int64(int8(w))
	case 2:
		return int64(int16(w))
	}
	return int64(int32(w))
}

// validFlags is the set of sfp_flags bits each version defines.
func validFlags(version uint8) Flags {
	switch version {
	case 1:
		return FlagFDESorted | FlagFramePointer
	case 2:
		return FlagFDESorted | FlagFramePointer | FlagFDEFuncStartPCRel
	}
	return FlagFDESorted | FlagFDEFuncStartPCRel // V3 dropped FRAME_POINTER
}

func parse(data []byte, vaddr uint64) (*Section, error) {
	if len(data) < 4 {
		return nil, formatErr(0, "truncated preamble: %d bytes", len(data))
	}
	s := &Section{data: data, vaddr: vaddr}
	switch {
	case data[0] == 0xe2 && data[1] == 0xde:
		s.be = false
	case data[0] == 0xde && data[1] == 0xe2:
		s.be = true
	default:
		return nil, formatErr(0, "bad magic %#02x %#02x", data[0], data[1])
	}
	h := &s.hdr
	h.Version = data[2]
	if h.Version < 1 || h.Version > 3 {
		return nil, formatErr(2, "unsupported version %d", h.Version)
	}
	h.Flags = Flags(data[3])
	if bad := h.Flags &^ validFlags(h.Version); bad != 0 {
		return nil, formatErr(3, "flags %#x invalid for version %d", uint8(bad), h.Version)
	}
	if len(data) < headerSize {
		return nil, formatErr(0, "truncated header: %d bytes, need %d", len(data), headerSize)
	}
	if uint64(len(data)) > maxSection {
		return nil, formatErr(0, "section of %d bytes is larger than the format can address", len(data))
	}
	h.ABI = ABI(data[4])
	switch h.ABI {
	case ABIAArch64BigEndian, ABIS390XBigEndian:
		if !s.be {
			return nil, formatErr(4, "big-endian ABI %d in a little-endian section", h.ABI)
		}
	case ABIAArch64LittleEndian, ABIAMD64LittleEndian:
		if s.be {
			return nil, formatErr(4, "little-endian ABI %d in a big-endian section", h.ABI)
		}
	default:
		return nil, formatErr(4, "unknown ABI %d", h.ABI)
	}
	s.spReg, s.fpReg = abiRegs(h.ABI)
	s.wide = h.Version == 3
	s.pcrel = h.Flags&FlagFDEFuncStartPCRel != 0
	h.CFAFixedFPOffset = int8(data[5])
	h.CFAFixedRAOffset = int8(data[6])
	h.AuxHeaderLen = data[7]
	h.NumFDEs = s.u32(8)
	h.NumFREs = s.u32(12)
	h.FRELen = s.u32(16)
	h.FDEOff = s.u32(20)
	h.FREOff = s.u32(24)

	size := uint64(len(data))
	hdrEnd := uint64(headerSize) + uint64(h.AuxHeaderLen)
	if hdrEnd > size {
		return nil, formatErr(7, "auxiliary header of %d bytes beyond section end %#x", h.AuxHeaderLen, size)
	}
	switch h.Version {
	case 1:
		s.fdeSize = 17
	case 2:
		s.fdeSize = 20
	default:
		s.fdeSize = 16
	}
	s.fdeOff = hdrEnd + uint64(h.FDEOff)
	fdeEnd := s.fdeOff + uint64(h.NumFDEs)*s.fdeSize
	if fdeEnd > size {
		return nil, formatErr(20, "FDE sub-section [%#x,%#x) beyond section end %#x", s.fdeOff, fdeEnd, size)
	}
	s.freOff = hdrEnd + uint64(h.FREOff)
	s.freEnd = s.freOff + uint64(h.FRELen)
	if s.freEnd > size {
		return nil, formatErr(24, "FRE sub-section [%#x,%#x) beyond section end %#x", s.freOff, s.freEnd, size)
	}
	if s.freOff < fdeEnd {
		return nil, formatErr(24, "FRE sub-section at %#x overlaps the FDE sub-section ending at %#x", s.freOff, fdeEnd)
	}
	for o := s.freEnd; o < size; o++ {
		if data[o] != 0 {
			return nil, formatErr(o, "non-zero byte after the FRE sub-section")
		}
	}
	// Every FRE is at least 2 bytes (1-byte start, info byte). The bound
	// also caps the validation walk below at linear work.
	if uint64(h.NumFREs) > uint64(h.FRELen)/2 {
		return nil, formatErr(12, "%d FREs cannot fit in %d bytes", h.NumFREs, h.FRELen)
	}

	var total uint64
	for i := 0; i < int(h.NumFDEs); i++ {
		n, err := s.validateFDE(i, uint64(h.NumFREs)-total)
		if err != nil {
			return nil, err
		}
		total += n
	}
	if total != uint64(h.NumFREs) {
		return nil, formatErr(12, "header counts %d FREs, the FDEs hold %d", h.NumFREs, total)
	}
	if err := s.checkOrder(); err != nil {
		return nil, err
	}
	return s, nil
}

// abiRegs returns the DWARF numbers of the stack and frame pointer.
func abiRegs(abi ABI) (sp, fp uint16) {
	switch abi {
	case ABIAMD64LittleEndian:
		return 7, 6
	case ABIS390XBigEndian:
		return 15, 11
	}
	return 31, 29 // aarch64
}

// checkOrder verifies a table flagged sorted (strictly increasing starts,
// as the kernel's CONFIG_SFRAME_VALIDATION demands) or builds the sorted
// index for one that is not flagged.
func (s *Section) checkOrder() error {
	n := int(s.hdr.NumFDEs)
	if s.hdr.Flags&FlagFDESorted != 0 {
		for i := 1; i < n; i++ {
			prev, cur := s.startOf(i-1), s.startOf(i)
			if cur <= prev {
				return formatErr(s.fdeOff+uint64(i)*s.fdeSize,
					"FDE %d starts at %#x, not above FDE %d at %#x in a table flagged sorted", i, cur, i-1, prev)
			}
		}
		s.indexStarts()
		return nil
	}
	order := make([]uint32, n)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortStableFunc(order, func(a, b uint32) int {
		sa, sb := s.startOf(int(a)), s.startOf(int(b))
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	s.order = order
	s.indexStarts()
	return nil
}

// indexStarts fills s.starts and s.funcs from the (verified or built)
// order.
func (s *Section) indexStarts() {
	s.starts = make([]uint64, s.hdr.NumFDEs)
	s.funcs = make([]Func, s.hdr.NumFDEs)
	for k := range s.starts {
		s.funcs[k] = s.decodeFDE(s.sorted(k))
		s.starts[k] = s.funcs[k].Start
	}
	s.top = make([]uint64, 0, len(s.starts)/topStride+1)
	for k := 0; k < len(s.starts); k += topStride {
		s.top = append(s.top, s.starts[k])
	}
}

// topStride is how many starts one entry of the top-level index covers.
const topStride = 64

// startOf computes FDE i's function start address.
func (s *Section) startOf(i int) uint64 {
	o := s.fdeOff + uint64(i)*s.fdeSize
	var v uint64
	if s.wide {
		v = s.u64(o)
	} else {
		v = uint64(int64(int32(s.u32(o))))
	}
	if s.pcrel {
		// Relative to the start-offset field itself, which is at offset 0
		// of the FDE in every version.
		return s.vaddr + o + v
	}
	return s.vaddr + v // relative to the section start (V1, V2 before 2.45)
}

// decodeFDE reads FDE i. It does not validate; Parse did.
func (s *Section) decodeFDE(i int) Func {
	o := s.fdeOff + uint64(i)*s.fdeSize
	f := Func{Index: i, Start: s.startOf(i)}
	var info, info2 uint8
	if s.hdr.Version == 3 {
		f.Size = s.u32(o + 8)
		a := s.freOff + uint64(s.u32(o+12))
		f.NumFREs = uint32(s.u16(a))
		info, info2 = s.u8(a+2), s.u8(a+3)
		f.RepSize = s.u8(a + 4)
		f.freStart = uint32(a + v3AttrSize)
	} else {
		f.Size = s.u32(o + 4)
		f.freStart = uint32(s.freOff + uint64(s.u32(o+8)))
		f.NumFREs = s.u32(o + 12)
		info = s.u8(o + 16)
		if s.hdr.Version == 2 {
			f.RepSize = s.u8(o + 17)
		}
	}
	f.FREType = info & 0xf
	f.PCType = PCType(info >> 4 & 1)
	f.PAuthKeyB = info>>5&1 != 0
	if s.hdr.Version == 3 {
		f.Signal = info>>7 != 0
		f.FDEType = FDEType(info2 & 0x1f)
	}
	return f
}

// blockSize is the PCMASK repetition block of f.
func (s *Section) blockSize(f *Func) uint64 {
	if f.RepSize == 0 && s.hdr.Version == 1 {
		return v1MaskBlock
	}
	return uint64(f.RepSize)
}

// validateFDE checks FDE i and walks all its FREs. budget is how many FREs
// the header still allows. It returns the FDE's FRE count.
func (s *Section) validateFDE(i int, budget uint64) (uint64, error) {
	o := s.fdeOff + uint64(i)*s.fdeSize
	infoOff := o + 16
	repOff := o + 17
	if s.hdr.Version == 3 {
		a := s.freOff + uint64(s.u32(o+12))
		if !span(a, v3AttrSize, s.freOff, s.freEnd) {
			return 0, formatErr(o+12, "FDE %d attribute block at %#x outside the FRE sub-section [%#x,%#x)", i, a, s.freOff, s.freEnd)
		}
		infoOff, repOff = a+2, a+4
		if t := s.u8(a + 3); t&0x1f > uint8(FDETypeFlex) {
			return 0, formatErr(a+3, "FDE %d has unknown FDE type %d", i, t&0x1f)
		}
	} else {
		fo := s.freOff + uint64(s.u32(o+8))
		if fo > s.freEnd {
			return 0, formatErr(o+8, "FDE %d FREs at %#x beyond the FRE sub-section end %#x", i, fo, s.freEnd)
		}
	}
	f := s.decodeFDE(i)
	if f.FREType > 2 {
		return 0, formatErr(infoOff, "FDE %d has invalid FRE type %d", i, f.FREType)
	}
	if f.PCType == PCMask && s.blockSize(&f) == 0 {
		return 0, formatErr(repOff, "FDE %d is PCMASK with a zero block size", i)
	}
	if uint64(f.NumFREs) > budget {
		return 0, formatErr(o, "FDE %d has %d FREs, more than the header's count leaves", i, f.NumFREs)
	}
	pos := uint64(f.freStart)
	var prev uint32
	for j := uint32(0); j < f.NumFREs; j++ {
		var fre rawFRE
		next, err := s.readFRE(&f, pos, &fre)
		if err != nil {
			return 0, err
		}
		if j > 0 && fre.start <= prev {
			return 0, formatErr(pos, "FDE %d FRE %d start %#x not above the previous %#x", i, j, fre.start, prev)
		}
		if f.PCType == PCInc && fre.start > f.Size {
			return 0, formatErr(pos, "FDE %d FRE %d start %#x beyond the function size %#x", i, j, fre.start, f.Size)
		}
		if _, err := s.normalise(&f, &fre); err != nil {
			return 0, err
		}
		prev = fre.start
		pos = next
	}
	return uint64(f.NumFREs), nil
}

// rawFRE is one frame row entry as stored.
type rawFRE struct {
	off   uint64 // section offset, for errors
	start uint32
	info  uint8
	n     uint8 // data words
	size  uint8 // bytes per data word
	words [maxWords]uint32
}

// freHeader reads the start address and info byte of the FRE at pos and
// returns the offset of the next FRE. ok is false when the FRE does not fit
// the FRE sub-section or its word size code is invalid.
func (s *Section) freHeader(f *Func, pos uint64) (start uint32, info uint8, next uint64, ok bool) {
	as := uint64(1) << (f.FREType & 3)
	if f.FREType > 2 || !span(pos, as+1, s.freOff, s.freEnd) {
		return 0, 0, 0, false
	}
	switch as {
	case 1:
		start = uint32(s.u8(pos))
	case 2:
		start = uint32(s.u16(pos))
	default:
		start = s.u32(pos)
	}
	info = s.u8(pos + as)
	code := info >> 5 & 3
	if code == 3 {
		return 0, 0, 0, false
	}
	n := uint64(info >> 1 & 0xf)
	next = pos + as + 1 + n<<code
	if next > s.freEnd {
		return 0, 0, 0, false
	}
	return start, info, next, true
}

// readFRE decodes the FRE at pos into fre and returns the next FRE's offset.
func (s *Section) readFRE(f *Func, pos uint64, fre *rawFRE) (uint64, error) {
	as := uint64(1) << (f.FREType & 3)
	if f.FREType > 2 || !span(pos, as+1, s.freOff, s.freEnd) {
		return 0, formatErr(pos, "FDE %d FRE header beyond the FRE sub-section end %#x", f.Index, s.freEnd)
	}
	start, info, next, ok := s.freHeader(f, pos)
	if !ok {
		if info = s.u8(pos + as); info>>5&3 == 3 {
			return 0, formatErr(pos+as, "FDE %d FRE has invalid data word size code 3", f.Index)
		}
		return 0, formatErr(pos, "FDE %d FRE data words beyond the FRE sub-section end %#x", f.Index, s.freEnd)
	}
	*fre = rawFRE{off: pos, start: start, info: info, n: info >> 1 & 0xf, size: 1 << (info >> 5 & 3)}
	if fre.n > maxWords {
		return 0, formatErr(pos+as, "FDE %d FRE has %d data words, at most %d are defined", f.Index, fre.n, maxWords)
	}
	w := pos + as + 1
	for k := uint8(0); k < fre.n; k++ {
		fre.words[k] = s.uword(w, fre.size)
		w += uint64(fre.size)
	}
	return next, nil
}
