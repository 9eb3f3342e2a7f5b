// Package fuzzbudget bounds how long Go's fuzzer minimises an input.
//
// The fuzzer minimises every input that reaches new code before it goes
// on fuzzing, for up to -test.fuzzminimizetime (default 60 s) each, and
// its minimiser tries removing every subsequence of the input: a cost
// quadratic in the input's size. For targets whose inputs are structured
// binaries (an ELF file, a CFI section: a few hundred bytes at the least)
// that left the fuzzer minimising most of the time: 3 to 40 executions in
// a 5 s run; text targets did the same with the multi-kilobyte inputs left
// in the fuzz cache by earlier runs. Every Fuzz target of the module calls
// Limit, which sets a short budget unless the command line gave one.
//
// The coordinating process reads the flag when the target calls f.Fuzz,
// so Limit must be called in the Fuzz function before that.
package fuzzbudget

import (
	"flag"
	"testing"
)

// Minimize is the budget Limit sets: a bounded number of executions per
// minimisation (a size-independent cap).
const Minimize = "2000x"

const flagName = "test.fuzzminimizetime"

// Limit sets -test.fuzzminimizetime to Minimize unless it was given.
func Limit(f *testing.F) {
	f.Helper()
	given := false
	flag.Visit(func(fl *flag.Flag) { given = given || fl.Name == flagName })
	if given || flag.Lookup(flagName) == nil {
		return
	}
	if err := flag.Set(flagName, Minimize); err != nil {
		f.Logf("fuzzbudget: %v", err)
	}
}
