// Package cfi decodes DWARF call frame information (.eh_frame and
// .debug_frame) into tables the unwinder can search: for an ELF virtual
// address, the rule for the CFA (register+offset or a DWARF expression),
// for the return address and for every general register the program
// describes, plus whether the code is a signal trampoline (CIE
// augmentation "S").
//
// # Lifecycle
//
// Load (or Build, for raw section bytes) parses every FDE header of the
// whole section with this package's own CIE/FDE decoder (entries.go; no
// .eh_frame_hdr needed), sorts them by address and returns an immutable
// *Table. An FDE's
// program runs the first time a lookup hits it and its rows are cached
// (atomically, so a Table is safe for concurrent use). Lazy decoding was
// chosen by measurement: for libc's 3,713 FDEs, parsing takes ~7 ms and
// running every program ~60 ms more, while a process's samples hit a few
// dozen FDEs. After that, Lookup is a binary search over FDEs and a scan
// of a handful of rows, without allocation.
//
// # Why not delve for everything
//
// Of delve, only the DWARF expression stack machine (pkg/dwarf/op) is
// used. Its CFA interpreter is not: it turns DW_CFA_restore into
// "undefined" where DWARF means the CIE's initial rule, panics on a
// truncated program, ignores the data alignment factor of
// DW_CFA_val_offset and only answers "the state at one PC". The
// interpreter here (program.go) reads through a sticky-error reader and
// reports a *FormatError with the section and byte offset; an FDE whose
// program is bad fails only the lookups it covers. Its frame parser is not
// either: it reads little-endian only (s390x is big-endian) and allocates
// per FDE; the own CIE/FDE decoder (entries.go, sticky-error reader,
// FormatError with the entry's offset) reads both byte orders, and the
// tests check it finds what delve's parser finds on real little-endian
// objects. Eval byte-swaps the fixed-size operands of s390x expressions
// before delve's stack machine runs them. 32-bit objects and other
// machines return ErrUnsupported.
//
// Expressions (DRAP frames' DW_CFA_def_cfa_expression, glibc's
// __restore_rt) are kept as bytes in the row and evaluated at unwind time
// by Eval, with delve's pkg/dwarf/op.
package cfi
