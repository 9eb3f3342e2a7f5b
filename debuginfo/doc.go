// Package debuginfo finds and reads the debugging information that names
// frames beyond what an object's own symbol table says: separate debug
// files, MiniDebugInfo, DWARF line tables and inlined-call trees, and Go's
// pclntab.
//
// # Lifecycle
//
// For each object the caller (the sampler's symboliser) asks a Locator for
// its separate debug file once (FindDebugFile: by build ID under
// /usr/lib/debug/.build-id or in the debuginfod client cache that
// elfutils, gdb and package debuginfod fill, else by .gnu_debuglink with
// its CRC32 checked), and MiniDebugInfo (.gnu_debugdata, xz-compressed). The
// resulting *elf.File objects feed symbols.LoadWithDebug for names, and
// NewLines for file:line and inline frames.
//
// Lines indexes lazily because a DWARF walk of libc takes tens of
// milliseconds: NewLines only reads each compile unit's PC ranges (one
// header per unit); the first lookup in a unit decodes that unit's line
// table and its subprogram/inlined-subroutine tree, which are then kept.
// Lines is safe for concurrent use. Frames returns the inline chain of one
// PC innermost first, as addr2line -i prints it.
//
// CallSites (callsites.go) reads an object's DWARF call-site records
// (DW_TAG_call_site, DW_TAG_GNU_call_site) in one scan that skips every
// subtree that cannot hold one (libc's debug file: about a second, most of
// it decompression). TailChain finds, for a caller's call and the function
// its callee frame is in, the one chain of tail calls between them: the
// frames gdb calls "tailcall", which no return address on the stack
// records. The sampler builds it once per module, in the background for
// the periodic engine.
//
// GoTable reads .gopclntab with debug/gosym for Go programs whose DWARF
// was stripped (-ldflags=-w): function name and file:line, no inlining
// (the pclntab's inline tree is not exposed by debug/gosym).
//
// All parsers here read untrusted bytes (the target's files, its memory):
// corrupt input gives an error naming what was being decoded, and panics
// inside debug/elf and debug/dwarf are recovered into errors.
package debuginfo
