// Package sframereport implements `stacktop sframe`, the inspector that
// answers "is this binary SFrame-ready, and where are the holes?".
//
// For each file, Inspect opens the ELF, lets package sframe find and decode
// the .sframe section, and then decodes every FDE and every row once, so a
// corrupt entry anywhere is reported rather than met later by the unwinder.
// From the decoded functions it computes coverage: the share of executable
// bytes (PF_X PT_LOAD segments, or SHF_EXECINSTR sections of a relocatable
// object) that FDEs describe, and the function symbols (STT_FUNC from
// .symtab and .dynsym) that no FDE touches, largest first.
//
// The result, a FileReport, is rendered three ways: WriteSummary (the
// default), WriteRows (the notation of binutils 2.46 `readelf --sframe`,
// so output can be diffed against readelf line by line), and JSON (the
// FileReport struct itself; its schema is documented in
// docs/sframe-inspector.md and a test keeps document and struct tags in
// step). Run does all files of one command line and returns the worst
// Outcome, which the CLI maps to its exit code.
//
// The package only reads: it never writes files and holds nothing open
// after Inspect returns.
package sframereport
