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
// Lines reads DWARF on demand, because reading all of libc's takes a
// quarter of a second (most of it inflating its zlib-compressed sections,
// the rest dwarf.New reading 2,000 units' abbreviation tables). NewLines
// takes .debug_aranges as the PC-to-unit index; the first lookup in a
// unit reads that unit alone (lazy.go: its bytes at their real offset in
// an image of .debug_info with one padding unit before them, so
// debug/dwarf parses two units) and decodes its line table and its
// subprogram/inlined-subroutine tree, which are then kept. Compressed
// sections are inflated only as far as the units read so far reach
// (section.go): a zlib or zstd stream has no random access. Objects
// without .debug_aranges, and old .zdebug sections, are indexed as
// before: every unit's header and PC ranges, from whole sections.
//
// Lines is safe for concurrent use. Frames returns the inline chain of one
// PC innermost first, as addr2line -i prints it; FramesNoWait never waits
// for a unit to be read, it starts reading it in the background and says
// the frames are not ready (the sampling engine's ticks use it).
//
// A Cache (NewLinesCached) keeps the decompressed prefixes in files keyed
// by build ID under the user's cache directory, so a later run reads them
// instead of inflating again, reading and checking only the blocks its
// lookups reach; SaveCache writes what a run added. cache.go explains why
// a damaged or concurrent cache never gives a wrong answer. The same
// directory keeps payloads its callers make from an object's symbol tables
// (Cache.Load and Store, objcache.go: the resolver's merged symbol table
// and function names), framed, keyed and summed the same way. Uncompressed
// sections of an object on disk are mapped too (section.go).
//
// CallSites (callsites.go) reads an object's DWARF call-site records
// (DW_TAG_call_site, DW_TAG_GNU_call_site), skipping every subtree that
// cannot hold one. Built on a lazy Lines (NewCallSitesFromLines) it is
// lazy too (callsites_lazy.go): a lookup reads the units whose
// .debug_aranges ranges hold its address (a call's, or a function's entry
// while a chain is searched), each once; AtNoWait and TailChainNoWait
// start a missing unit in the background, like FramesNoWait. Without
// .debug_aranges every unit is read in one scan. TailChain finds, for a
// caller's call and the function its callee frame is in, the one chain of
// tail calls between them: the frames gdb calls "tailcall", which no
// return address on the stack records.
//
// GoTable reads .gopclntab with debug/gosym for Go programs whose DWARF
// was stripped (-ldflags=-w): function name and file:line, no inlining
// (the pclntab's inline tree is not exposed by debug/gosym).
//
// All parsers here read untrusted bytes (the target's files, its memory):
// corrupt input gives an error naming what was being decoded, and panics
// inside debug/elf and debug/dwarf are recovered into errors.
package debuginfo
