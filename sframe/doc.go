// Package sframe decodes, validates and searches .sframe sections (the
// SFrame stack trace format, versions 1 to 3) for the ABIs SFrame defines:
// aarch64 (big- and little-endian), x86-64 and s390x. It is pure: it reads
// bytes the caller supplies and makes no system calls.
//
// # Lifecycle
//
// A Section comes from Parse (raw section bytes plus the section's virtual
// address) or FromELF (an *elf.File the caller opened: the PT_GNU_SFRAME
// segment, else the .sframe / SHT_GNU_SFRAME section; relocatable objects
// are taken at address 0 with their FDE start relocations resolved). Parse
// validates everything once: the header, both sub-sections, every FDE and
// every FRE, at least as strictly as the Linux kernel's SFrame reader with
// CONFIG_SFRAME_VALIDATION. Corrupt bytes give a *FormatError with the
// offset inside the section and what is wrong; Parse never panics and never
// reads out of range.
//
// After Parse the Section is immutable and safe for concurrent use. It keeps
// the raw bytes and decodes lazily: Func decodes one FDE, Rows the FREs of
// one function (for the inspector), and Lookup binary-searches the FDE table
// on computed start addresses and walks a single function's FREs, decoding
// only the row it returns. Lookup allocates nothing, so the unwinder can call
// it per frame per sample.
//
// # Rows
//
// Lookup and Rows return a Row normalised so that callers need not know the
// version, ABI or FDE type: the CFA as a register rule (the ABI's DWARF SP or
// FP number, or a flex FDE's register; s390x offsets decoded), the RA and FP
// as "same", "stack slot at CFA+N" or "register" rules, with Fixed and
// Padding recording the encoding for readelf-style output. A Row's Kind is
// what an unwinder acts on; Padding never changes it (an x86-64 flex RA
// padding word still means the header's fixed RA slot).
//
// # Errors
//
// ErrNoFunc: no FDE covers the PC. ErrNoRow (which wraps ErrNoFunc): an FDE
// covers it but has no row for it, e.g. a V3 signal trampoline FDE without
// FREs; FuncAt still returns that function. *FormatError: corrupt input,
// only from Parse and FromELF.
//
// # Unsorted FDE tables
//
// A table whose header has SFRAME_F_FDE_SORTED set must have strictly
// increasing start addresses (the kernel's validation rule; duplicates are
// rejected), else Parse fails. A table without the flag is accepted: Parse
// builds a sorted index of FDE numbers once (4 bytes per FDE) and Lookup
// searches through it. libsframe and the kernel refuse lookups on such
// tables instead; we accept them because the only producers of unsorted
// tables are relocatable objects (gas leaves the flag clear in .o files)
// and hand-made sections, which the inspector must still be able to show
// and tests must be able to search. Func(i) always uses table order, the
// "func idx" readelf prints.
//
// # Version notes
//
// V1 PCMASK FDEs carry no repetition block size; a size of 16 (an x86-64 PLT
// entry) is assumed for every ABI, and Func.RepSize stays 0. V2 function
// starts are section-relative unless SFRAME_F_FDE_FUNC_START_PCREL (binutils
// 2.45) makes them relative to the FDE field itself; V3 always uses the
// latter with 64-bit offsets. s390x V2 RA/FP words with the low bit set name
// a register ((regnum<<1)|1); in V3 such words are plain offsets and register
// rules come from flex FDEs. See README.md for the design rationale.
package sframe
