package targets

// Variants lists the build variants of every target, as file name suffixes:
// NAME-sframe1 (SFrame V1), NAME-sframe2 (V2), NAME-sframe3 (V3), all built
// with -fomit-frame-pointer, and NAME-fp (frame pointers, no .sframe).
var Variants = []string{"sframe1", "sframe2", "sframe3", "fp"}

// SFrameVersion returns the .sframe version a variant carries, 0 for none.
func SFrameVersion(variant string) int {
	switch variant {
	case "sframe1":
		return 1
	case "sframe2":
		return 2
	case "sframe3":
		return 3
	}
	return 0
}

// ChainsStacks gives, for each worker thread of the chains target (keyed by
// its comm), the functions of the chains binary on its stack, innermost
// first, down to the first frame outside the binary (libc's start_thread).
// This is what gdb reports for every variant; a correct unwinder must
// report the same. The main thread (comm = the binary's name) is parked in
// libc's clock_nanosleep and has no such prefix.
var ChainsStacks = map[string][]string{
	"recurse": {"recurse_leaf",
		"recurse_step", "recurse_step", "recurse_step", "recurse_step",
		"recurse_step", "recurse_step", "recurse_step", "recurse_step",
		"recurse_thread"},
	"tailcall":  {"tail_b", "tail_entry", "tailcall_thread"}, // tail_a tail-called tail_b
	"bigframe":  {"big_leaf", "big_mid", "big_outer", "bigframe_thread"},
	"aligned":   {"aligned_leaf", "aligned_frame", "aligned_thread"},
	"drap":      {"drap_leaf", "drap_frame", "drap_thread"},
	"sysread":   {"sysread_block", "sysread_outer", "sysread_thread"},
	"syspause":  {"syspause_block", "syspause_thread"},
	"asmprolog": {"asm_prologue_spin", "asm_caller", "asmprolog_thread"},
	"asmentry":  {"asm_entry_spin", "asm_entry_caller", "asmentry_thread"},
}

// ManythreadsStacks is ChainsStacks for the manythreads target: only its
// spinning threads have frames of the binary on top of the stack.
var ManythreadsStacks = map[string][]string{
	"mt-spin": {"mt_spin_leaf", "mt_spin_mid", "mt_spin_thread"},
}
