package sframe

import (
	"encoding/binary"
	"math"
)

// A small test-only SFrame encoder. It writes what gas/ld would for the
// given functions, in any version, ABI and byte order, and records where it
// put each structure so corrupt-input tests can patch exact bytes.

type tFRE struct {
	Start   uint32
	SP      bool    // info bit 0: CFA base is SP (default FDEs)
	Mangled bool    // info bit 7
	Words   []int64 // data words as stored (s390x CFA words encoded)
	Size    uint8   // bytes per word; 0 picks the smallest that fits
	// Want is the expected normalised row (Start and Signal are filled in
	// by the checker). Ignored by the encoder.
	Want Row
}

type tFDE struct {
	Start   uint64 // absolute function start
	Size    uint32
	FREType int8 // -1 picks like gas (by Size)
	PCMask  bool
	PAuthB  bool
	Signal  bool
	Flex    bool
	Rep     uint8
	FREs    []tFRE
}

type tSection struct {
	Version      uint8
	Flags        Flags
	ABI          ABI
	FixFP, FixRA int8
	Vaddr        uint64
	Aux          []byte
	FDEs         []tFDE
	ReverseFREs  bool // lay the FRE blocks out in reverse FDE order
	Pad          int  // trailing zero bytes
}

// encLayout records section offsets of what encode wrote.
type encLayout struct {
	fde  []int   // FDE (V3: index entry) i
	attr []int   // V3 attribute block of FDE i
	fre  [][]int // FRE j of FDE i
}

func (t *tSection) bigEndian() bool {
	return t.ABI == ABIAArch64BigEndian || t.ABI == ABIS390XBigEndian
}

func wordSize(ws []int64) uint8 {
	size := uint8(1)
	for _, w := range ws {
		switch {
		case w >= math.MinInt8 && w <= math.MaxInt8:
		case w >= math.MinInt16 && w <= math.MaxInt16:
			size = max(size, 2)
		default:
			size = 4
		}
	}
	return size
}

func freType(f *tFDE) uint8 {
	if f.FREType >= 0 {
		return uint8(f.FREType)
	}
	switch {
	case f.Size < 0x100:
		return 0
	case f.Size < 0x10000:
		return 1
	}
	return 2
}

func (t *tSection) encode() ([]byte, encLayout) {
	var bo binary.AppendByteOrder = binary.LittleEndian
	if t.bigEndian() {
		bo = binary.BigEndian
	}
	var fdeSize int
	switch t.Version {
	case 1:
		fdeSize = 17
	case 2:
		fdeSize = 20
	default:
		fdeSize = 16
	}
	hdrEnd := headerSize + len(t.Aux)
	freBase := hdrEnd + len(t.FDEs)*fdeSize
	l := encLayout{fde: make([]int, len(t.FDEs)), attr: make([]int, len(t.FDEs)), fre: make([][]int, len(t.FDEs))}

	// FRE blocks.
	var fres []byte
	freRel := make([]int, len(t.FDEs))
	numFREs := 0
	order := make([]int, len(t.FDEs))
	for i := range order {
		order[i] = i
		if t.ReverseFREs {
			order[i] = len(t.FDEs) - 1 - i
		}
	}
	for _, i := range order {
		f := &t.FDEs[i]
		freRel[i] = len(fres)
		ft := freType(f)
		info := ft | b2u(f.PCMask)<<4 | b2u(f.PAuthB)<<5 | b2u(f.Signal)<<7
		if t.Version == 3 {
			l.attr[i] = freBase + len(fres)
			fres = bo.AppendUint16(fres, uint16(len(f.FREs)))
			fres = append(fres, info, b2u(f.Flex), f.Rep)
		}
		l.fre[i] = make([]int, len(f.FREs))
		for j, r := range f.FREs {
			l.fre[i][j] = freBase + len(fres)
			switch ft {
			case 0:
				fres = append(fres, uint8(r.Start))
			case 1:
				fres = bo.AppendUint16(fres, uint16(r.Start))
			default:
				fres = bo.AppendUint32(fres, r.Start)
			}
			size := r.Size
			if size == 0 {
				size = wordSize(r.Words)
			}
			code := map[uint8]uint8{1: 0, 2: 1, 4: 2}[size]
			fres = append(fres, b2u(r.SP)|uint8(len(r.Words))<<1|code<<5|b2u(r.Mangled)<<7)
			for _, w := range r.Words {
				switch size {
				case 1:
					fres = append(fres, uint8(w))
				case 2:
					fres = bo.AppendUint16(fres, uint16(w))
				default:
					fres = bo.AppendUint32(fres, uint32(w))
				}
			}
		}
		numFREs += len(f.FREs)
	}

	b := make([]byte, 0, freBase+len(fres)+t.Pad)
	magic := []byte{0xe2, 0xde}
	if t.bigEndian() {
		magic = []byte{0xde, 0xe2}
	}
	b = append(b, magic...)
	b = append(b, t.Version, uint8(t.Flags), uint8(t.ABI), uint8(t.FixFP), uint8(t.FixRA), uint8(len(t.Aux)))
	b = bo.AppendUint32(b, uint32(len(t.FDEs)))
	b = bo.AppendUint32(b, uint32(numFREs))
	b = bo.AppendUint32(b, uint32(len(fres)))
	b = bo.AppendUint32(b, 0)
	b = bo.AppendUint32(b, uint32(len(t.FDEs)*fdeSize))
	b = append(b, t.Aux...)
	for i := range t.FDEs {
		f := &t.FDEs[i]
		l.fde[i] = len(b)
		rel := int64(f.Start - t.Vaddr)
		if t.Flags&FlagFDEFuncStartPCRel != 0 {
			rel -= int64(len(b))
		}
		ft := freType(f)
		info := ft | b2u(f.PCMask)<<4 | b2u(f.PAuthB)<<5
		switch t.Version {
		case 3:
			b = bo.AppendUint64(b, uint64(rel))
			b = bo.AppendUint32(b, f.Size)
			b = bo.AppendUint32(b, uint32(freRel[i]))
		default:
			b = bo.AppendUint32(b, uint32(int32(rel)))
			b = bo.AppendUint32(b, f.Size)
			b = bo.AppendUint32(b, uint32(freRel[i]))
			b = bo.AppendUint32(b, uint32(len(f.FREs)))
			b = append(b, info)
			if t.Version == 2 {
				b = append(b, f.Rep, 0, 0)
			}
		}
	}
	b = append(b, fres...)
	b = append(b, make([]byte, t.Pad)...)
	return b, l
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
