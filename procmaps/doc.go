// Package procmaps reads what a sampler needs to know about a live process
// from /proc: its memory mappings, its threads and their state, the file
// behind a mapping and the load bias of the ELF object in it. The objects
// themselves (their build IDs and unwind tables, shared across processes)
// are internal/modules': this package decodes no unwind table, so ptrace,
// which reads /proc through it, links no SFrame decoder.
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
// # Reads
//
// Threads, ReadStat, ReadStatus, ReadThreadInfo, ReadMaps, ThreadName,
// Comm and Children are one-shot reads; threads and processes come and go
// between calls, so callers must expect ENOENT and ESRCH at any point.
// OpenSchedstat and OpenStat keep a thread's file open for rereads.
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
package procmaps
