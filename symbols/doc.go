// Package symbols names code addresses from ELF symbol tables. It is the
// last step before output: unwind hands over frames as (module, ELF
// virtual address) pairs, and symbols turns each into "function+0xoff",
// or "module+0xoff" when nothing covers the address, so a frame is never
// dropped for lack of a name.
//
// # Lifecycle
//
// The caller (procmaps' module cache) opens each object once, calls Load
// with the *elf.File (or LoadReaderAt with the raw bytes) and keeps the
// resulting *Table for as long as the object stays mapped. A Table is
// immutable apart from a per-symbol demangling cache and is safe for
// concurrent use. Lookup takes an ELF virtual address: the caller
// subtracts the module's load bias first. Lookup is a binary search over a
// sorted []uint64 and does not allocate; C++ and Rust names are demangled
// on the first Lookup that returns them, because demangling costs tens of
// microseconds per name and a profile touches a small fraction of a
// library's symbols. Describe, FormatFrame and ModuleOffsetName format
// the result for dump and record.
//
// This package does not touch processes: it imports nothing from
// ptrace, procmaps or unwind, and reads only the ELF object it is given.
//
// # What is covered
//
//   - .symtab and .dynsym, merged: STT_FUNC and STT_GNU_IFUNC symbols, and
//     STT_NOTYPE assembly labels that are global/weak or sized, when
//     defined in an executable section. One name per address, chosen
//     deterministically (sized, function, GLOBAL > WEAK > LOCAL, fewer
//     leading underscores, shorter, then byte order). Size-0 symbols
//     reach to the next symbol but not past their section. Nested sized
//     symbols resolve to the innermost.
//   - PLT stubs, named "puts@plt" as objdump and gdb do, by decoding each
//     stub's indirect jump to its GOT slot and naming the slot after its
//     dynamic relocation (JUMP_SLOT, GLOB_DAT, or "*ABS*+0xaddr" for
//     IRELATIVE): x86-64 .plt (lazy, PLT0 + 16-byte entries), .plt.sec
//     (IBT), .plt.got and .plt.bnd; AArch64 .plt with or without BTI
//     (decoder tested on synthetic stubs only: no AArch64 toolchain here).
//   - Demangling of Itanium C++ (full signature, as c++filt and gdb print
//     minimal symbols) and Rust legacy and v0 (as rustfilt prints them:
//     no hash, no crate disambiguator). Invalid names stay raw.
//
// Corrupt objects give a *FormatError naming the section being decoded;
// panics inside debug/elf are recovered into one.
//
// # What comes later, and where it plugs in
//
//   - Separate debug files and MiniDebugInfo: LoadWithDebug(f, debug...)
//     merges the .symtab of each debug file (package debuginfo finds them
//     by build ID or .gnu_debuglink and decompresses .gnu_debugdata) into
//     the same candidate list as Load; symbols in the debug file's NOBITS
//     code sections are accepted there.
//   - DWARF line tables and inlined frames live in package debuginfo
//     (Lines.Frames); Table stays the cheap first answer and the fallback
//     when there is no DWARF.
//   - Go binaries: .gopclntab gives function names (and inlining) even in
//     stripped Go binaries; debug/gosym reads it. It would add candidates
//     from the pclntab when .symtab is missing.
package symbols
