package sframe

// This file is the package's public contract, shared by the decoder, the
// inspector (stacktop sframe) and the unwinder. Change it only with care:
// other packages are written against it.

// ABI is the sfh_abi_arch byte of the header.
type ABI uint8

const (
	ABIAArch64BigEndian    ABI = 1
	ABIAArch64LittleEndian ABI = 2
	ABIAMD64LittleEndian   ABI = 3
	ABIS390XBigEndian      ABI = 4
)

// Flags is the preamble's sfp_flags byte.
type Flags uint8

const (
	FlagFDESorted         Flags = 0x01
	FlagFramePointer      Flags = 0x02 // V1/V2 only
	FlagFDEFuncStartPCRel Flags = 0x04 // V2 errata 1 and V3
)

// Header is the decoded 28-byte SFrame header (identical layout in V1-V3).
type Header struct {
	Version          uint8
	Flags            Flags
	ABI              ABI
	CFAFixedFPOffset int8
	CFAFixedRAOffset int8
	AuxHeaderLen     uint8
	NumFDEs          uint32
	NumFREs          uint32
	FRELen           uint32
	FDEOff           uint32
	FREOff           uint32
}

// PCType says how FRE start addresses match a PC (func_info bit 4).
type PCType uint8

const (
	PCInc  PCType = 0 // FRE start is an offset from the function start
	PCMask PCType = 1 // FRE start is an offset inside a repeated block (PLT)
)

// FDEType is the V3 func_info2 FDE type; V1/V2 FDEs are always FDETypeDefault.
type FDEType uint8

const (
	FDETypeDefault FDEType = 0
	FDETypeFlex    FDEType = 1
)

// Func is one function descriptor entry, decoded. Start is an address in the
// ELF's virtual address space (the section's vaddr applied), or for a
// relocatable object the raw section-relative value, as readelf shows it.
type Func struct {
	Index     int
	Start     uint64
	Size      uint32
	NumFREs   uint32
	FREType   uint8 // 0 ADDR1, 1 ADDR2, 2 ADDR4
	PCType    PCType
	FDEType   FDEType
	PAuthKeyB bool   // aarch64: B key (func_info bit 5)
	Signal    bool   // V3: signal trampoline (func_info bit 7)
	RepSize   uint8  // PCMASK block size (V2, V3)
	freStart  uint32 // section offset of the first FRE (private to the decoder)
}

// RuleKind is how a value (CFA, return address, saved frame pointer) of the
// caller is recovered.
type RuleKind uint8

const (
	// RuleSame: the value was not saved; it is still in its register (the
	// RA in x30 on arm64 or r14 on s390x; the FP unchanged). An RA rule of
	// this kind is valid only in the topmost frame.
	RuleSame RuleKind = iota
	// RuleCFA: value = CFA + Offset, dereferenced when Deref (a stack slot,
	// readelf "c-16").
	RuleCFA
	// RuleReg: value = R[Reg] + Offset, dereferenced when Deref. Used for the
	// CFA itself (Reg is the ABI's SP or FP DWARF number in default FDEs) and
	// for register-saved RA/FP (s390x, flex FDEs).
	RuleReg
)

// Rule is one recovery rule. Fixed marks an RA/FP rule that comes from the
// header's fixed offset (readelf "f"); Padding marks an RA padding word
// (readelf "U"), which behaves like RuleSame.
type Rule struct {
	Kind    RuleKind
	Reg     uint16
	Offset  int64
	Deref   bool
	Fixed   bool
	Padding bool
}

// Row is the unwind row (FRE) that applies at a PC, normalised so the
// unwinder need not know the version, ABI or FDE type it came from.
type Row struct {
	// Start is the FRE's start address: an absolute address for PCINC
	// functions, the offset inside the repeated block for PCMASK ones.
	Start uint64
	CFA   Rule
	RA    Rule
	FP    Rule
	// Outermost is an "RA undefined" row (N = 0 data words): no caller.
	Outermost bool
	// MangledRA: aarch64 FRE bit 7, the RA carries a pointer-authentication code.
	MangledRA bool
	// Signal: the function is a signal trampoline (V3 FDE bit).
	Signal bool
}
