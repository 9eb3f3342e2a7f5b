// Package symbols names code addresses from ELF symbol tables, and JIT
// code from perf maps. unwind hands over frames as (module, ELF virtual
// address) pairs; a Table says which function covers an address, or which
// symbol precedes it when none does. Turning that into a frame's printed
// name ("function+0xoff", or "module+0xoff" when nothing covers the
// address, so a frame is never dropped for lack of a name) is package
// profile's (Frame.Name, Frame.Label), the same for every output.
//
// # Lifecycle
//
// The caller, the sampler's symbolizer, keeps one Table per mapped object
// for as long as the object stays mapped. It opens the object once, asks
// package debuginfo for the object's separate debug file and its
// MiniDebugInfo, and calls LoadWithDebug with all it found (then Load
// alone if a corrupt debug file made that fail). A Table is
// immutable apart from a per-symbol demangling cache and is safe for
// concurrent use. Lookup and Preceding take an ELF virtual address: the
// caller subtracts the module's load bias first. Lookup is a binary search
// over a sorted []uint64 and does not allocate; C++ and Rust names are
// demangled on the first Lookup that returns them, because demangling
// costs tens of microseconds per name and a profile touches a small
// fraction of a library's symbols. Demangle is exported for package
// debuginfo, which demangles DWARF's linkage names the same way.
//
// FuncValues maps every function name of an object's symbol tables (its
// debug file's too) to its value, aliases included: the resolver's tail-
// call frames look up a callee DWARF names only by a declaration.
// FuncNames holds that map sorted, for lookups without a map.
//
// A Table and FuncNames have a binary form (AppendBinary,
// UnmarshalTable, UnmarshalFuncNames) that the resolver keeps in a cache
// between runs: decoding it checks everything a lookup relies on, so a
// damaged cache file is an error, never a wrong name or a panic.
//
// ParsePerfMap reads the /tmp/perf-PID.map a JIT compiler writes (the
// caller reads the file); a PerfMap names addresses in anonymous memory,
// where no module is.
//
// This package does not touch processes: it imports nothing from
// ptrace, procmaps or unwind, and reads only the ELF object (or perf map
// bytes) it is given.
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
// # Around it
//
//   - Separate debug files and MiniDebugInfo: LoadWithDebug(f, debug...)
//     merges the .symtab of each debug file (package debuginfo finds them
//     by build ID or .gnu_debuglink and decompresses .gnu_debugdata) into
//     the same candidate list as Load; symbols in the debug file's NOBITS
//     code sections are accepted there.
//   - DWARF line tables and inlined frames live in package debuginfo
//     (Lines.Frames); Table stays the cheap first answer and the fallback
//     when there is no DWARF.
//   - Go binaries: package debuginfo reads .gopclntab (debug/gosym), whose
//     function names the symbolizer uses when .symtab has none (stripped
//     Go binaries); Table itself reads only ELF symbol tables.
package symbols
