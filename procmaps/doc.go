// Package procmaps reads what a sampler needs to know about a live process
// from /proc: its memory mappings, its threads, and, for every executable
// mapping, the ELF object behind it, its load bias and its unwind tables.
//
// # Parsing
//
// ParseMaps, ParseStat, ParseSchedstat and ParseStatus are strict parsers
// of kernel text. Input that does not have the kernel's shape is an error
// (*ParseError, *StatError, *StatusError) saying where and what, never a
// guess and never a panic; each has a fuzz target. The comm field of stat
// is cut at the last ')' because a thread may name itself anything,
// parentheses included.
//
// No other package opens a file under /proc: ptrace, the engine and the
// command line read it through this package, including the small facts of
// files.go (ThreadName, Comm, Children, OpenMem, PtraceScope, ...) and the
// paths into a process's namespace (RootDir, FDPath). Tests may read /proc
// themselves.
//
// # Lifecycle
//
// A ModuleCache lives as long as a sampling session (one `stacktop top` or
// `record` run) and is shared by every process, thread and sample of it. It
// opens each ELF object once, parses its headers, build ID and .sframe once,
// and keeps the file open so later stages can read symbols from
// Module.File. Modules are keyed by build ID, else by (device, inode, size,
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
// Threads, ReadStat, ReadStatus, ReadThreadInfo, ReadMaps, ThreadName,
// Comm and Children are one-shot reads; threads and processes come and go between calls, so callers must
// expect ENOENT and ESRCH at any point.
//
// # Finding the file behind a mapping
//
// The path in /proc/PID/maps is the path in the target's mount namespace at
// the time it was mapped. It may since have been deleted (an upgrade, a test
// binary removed after start), replaced by another file at the same path,
// or belong to a container whose root is not ours. OpenMapping therefore
// tries, in order:
//
//   - /proc/PID/map_files/START-END, a link to the mapped file itself:
//     correct for deleted and replaced files and in any namespace, but
//     following it needs CAP_SYS_ADMIN (root, in practice).
//   - /proc/PID/root/PATH: the path resolved in the target's root, which is
//     what makes containers work without map_files.
//   - PATH in our own namespace.
//
// The last two are accepted only if the file's device and inode are the
// mapping's (*MismatchError otherwise): symbolising or unwinding with
// another build of a binary gives confidently wrong stacks, which is worse
// than none.
//
// # Load bias
//
// Runtime address = ELF virtual address + bias. For a mapping at vm_start of
// file offset O, backed by the PT_LOAD (p_offset, p_vaddr) that holds O,
// bias = vm_start - O + p_offset - p_vaddr (LoadBias). It is 0 for a
// non-PIE ET_EXEC and the load address for PIEs and shared libraries.
//
// # The vDSO
//
// The vDSO has no file. It is an ExecMapping with IsVDSO set and a nil
// Module; a stage that can read the target's memory can copy the mapping
// and call ModuleFromImage.
package procmaps
