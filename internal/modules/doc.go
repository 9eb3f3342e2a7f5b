// Package modules owns the ELF objects a sampled process runs: a
// ModuleCache that opens each object once (headers, build ID, .sframe)
// for every process of a session, and AddressSpace snapshots that give
// every executable mapping of one process its Module and load bias. The
// /proc reads and the opening of a mapping's file are procmaps'; the
// decoding of .sframe is sframe's.
//
// # Lifecycle
//
// A ModuleCache lives as long as a sampling session (one `stacktop top` or
// `record` run) and is shared by every process, thread and sample of it. It
// opens each ELF object once, parses its headers, build ID and .sframe once,
// builds its DWARF CFI table at the first lookup that needs it
// (Module.CFI), and keeps the file open so later stages can read symbols
// from Module.File: every unwind table of a module lives as long as the
// module, under this one cache. Modules are keyed by build ID, else by (device, inode, size,
// mtime), so two processes of one binary, or two containers holding copies
// of it, share one *Module. Close the cache when the session ends; the
// modules' files are invalid after that.
//
// An AddressSpace is an immutable snapshot of one process: its maps plus a
// Module and load bias for every executable mapping. Take one when
// attaching. Before each sample (or every few), call Refresh: it re-reads
// /proc/PID/maps (tens of microseconds), returns the same snapshot when the
// text is unchanged, and otherwise builds a new one that reuses every
// unchanged mapping's module and bias, so a dlopen or munmap costs only the
// new objects. Because snapshots are never modified, an unwinder may keep
// using an old one while a new one is built. A PC that Find cannot place
// after a Refresh lies in memory that is not executable or not mapped:
// the walk stops there.
//
// # The vDSO
//
// The vDSO has no file. It is an ExecMapping with IsVDSO set and a nil
// Module; a stage that can read the target's memory can copy the mapping
// and call ModuleFromImage.
package modules
