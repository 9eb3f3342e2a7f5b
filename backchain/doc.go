// Package backchain unwinds s390x stacks through the back chain: the word
// at offset 0 of every frame that code built with -mbackchain stores, which
// holds the address of the caller's frame (the stack pointer the function
// was entered with), or zero in the outermost frame.
//
// It is the s390x fallback of package unwind: SFrame covers the code
// assembled with --gsframe, and a frame no SFrame row describes is stepped
// here. An Unwinder is an unwind.Stepper; hand it to the walker through
// unwind.Options.Fallback:
//
//	st := unwind.Walk(r, mem, mods, unwind.Options{Fallback: backchain.Unwinder{InVDSO: isVDSO}})
//
// The layout followed is the s390x ELF ABI's 160-byte register save area
// (struct stack_frame_user): the back chain at offset 0, the saved r14
// (the return address) at offset 112, the saved r15 at 120. A function
// stores its registers into its caller's save area, so the return address
// of the function owning the frame at SP is at back_chain+112 and the
// caller's stack pointer is the back chain itself.
//
// Two frames are not ordinary frames:
//
//   - the kernel's vDSO entry wrapper allocates 168 bytes, stores a zero
//     back chain and keeps the return address at offset 160 (struct
//     stack_frame_vdso_wrapper); when Unwinder.InVDSO says the PC is in the
//     vDSO, a zero back chain is read that way instead of ending the walk;
//   - in the topmost frame a function may not have stored its return
//     address: a leaf (GCC allocates a frame and stores the back chain in
//     leaves too, but saves r14 only in functions that call), or a PC in a
//     prologue. There the return address is still in r14: when the saved
//     one is not a plausible code address (zero, odd, or rejected by
//     Unwinder.IsCode) the live r14 is used, with the back chain as the
//     caller's stack pointer (or the current SP when the back chain is
//     zero: a leaf without a frame called by the outermost function).
//
// With Unwinder.FuncAt (the symbol table), a topmost frame's live r14 is
// preferred to the saved one when it is a return address into another
// function than the PC's, right after a call instruction: a leaf with no
// frame of its own, whose back chain is its caller's, or whose caller's
// save slot holds an older return address (leaf.go).
//
// Known limits, shared with the kernel's back-chain unwinder: without
// FuncAt, a topmost function caught before it stored its back chain makes
// the step skip its caller, and a leaf whose caller's save slot still
// holds an older, plausible return address yields that one; and r11 cannot be recovered, so an
// SFrame row based on r11 in a caller reached through the back chain fails.
//
// The package is pure: it reads memory only through the unwind.Memory it
// is given and issues no system calls, so a snapshot of an s390x thread
// unwinds on any host.
package backchain
