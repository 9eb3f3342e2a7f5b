// Package unwind walks a thread's user stack from its registers, for any
// target architecture (amd64, arm64, s390x), over three small interfaces:
// the registers (regs.Set, whose Arch decides everything arch-specific, never
// the host), the target's memory (Memory, an io.ReaderAt) and the mapped
// code (Modules, which finds the module, load bias and unwind table of a PC).
//
// The same walker runs on a live process (Memory reads process_vm_readv,
// Modules comes from /proc/PID/maps) and on a snapshot in a unit test (a
// StackWindow over bytes built by hand or saved from a capture, a
// ModuleList of fakes). Nothing in the package issues a system call.
//
// # Lifecycle
//
// A sampler keeps one Walker per goroutine and calls Walker.Walk for each
// sample: it reuses its frame buffer, so a successful walk allocates
// nothing. The returned Stack.Frames is valid until the next Walk. The
// sampler typically copies [SP, SP+N) while the thread is stopped, resumes
// it, and walks a StackWindow over that copy with the live reader as
// Fallback for anything above the window. With StackWindow.StackEnd set
// the window records how far up the walk read the thread's stack and how
// often the copy lacked it (read live, after the thread moved on): the
// sampler sizes its next copies from that (N is a hint, not a wall). Walk
// (the function) is the one-shot form.
//
// # One step
//
// Frame 0 is the registers (MethodRegs, Exact). For each frame the walker
// finds the PC's module (none ends the walk: ErrNoModule) and looks the PC
// up (the exact PC for frame 0 and for a frame a signal interrupted, the
// return address minus one for callers, so that a call at the very end of
// a function is not attributed to the next one) in, per frame and in this
// order:
//
//  1. the module's SFrame rows, evaluated as the proposed Linux kernel
//     SFrame unwinder does: CFA from SP, FP or a known register (FP only
//     if FP >= SP), caller SP = CFA + the ABI's offset (-160 on s390x),
//     return address and FP from their rules, a PAC stripped from aarch64
//     return addresses marked mangled. A row whose return address is still
//     in its register only describes the topmost frame;
//  2. the module's DWARF CFI (Module.CFI, a *cfi.Table): CFA = register +
//     offset or a DWARF expression (DRAP frames, which SFrame before V3
//     cannot describe), the return address and every register with a
//     rule; callee-saved registers without one (rbx, rbp, r12-r15; x19-x29)
//     keep their value, so a later CFI row may use them. An undefined
//     return address is the outermost frame. A rule needing a register
//     the frame does not know leaves the step to frame pointers;
//  3. a signal trampoline, recognised by an SFrame or CFI row marked
//     "signal" or by its code (glibc's __restore_rt on x86-64, the vDSO's
//     __kernel_rt_sigreturn on aarch64, svc 173 or svc 119 on s390x):
//     every general register of the interrupted code is read from the
//     kernel's signal frame at SP. That frame has MethodSignal and an
//     exact PC (Frame.Exact), and its own step may use innermost-only
//     rows (a leaf, a prologue);
//  4. frame pointers on amd64 and arm64, or Options.Fallback (the hook
//     for the s390x back chain).
//
// A corrupt table is recorded in Stack.LookupErr and the next method is
// tried. Options.Unwinders replaces this order with the user's ordered
// subset (--unwinder); a frame none of its methods describes ends the walk
// with ErrNoUnwindInfo caused by a *NotCoveredError. Without a table row
// for frame 0 on arm64, a leaf's caller is taken from x30 when that is a
// plausible return address into another function (leaf.go, MethodLinkReg).
// Options.Switch (a StackSwitcher; gort/ for Go) is asked before each step
// for stack switches no table describes: Go's runtime.systemstack returns
// from the system stack to the goroutine's (MethodGoStack).
//
// Every frame says how it was found (Frame.Method). Stack.Complete is set
// only at a true outermost frame: an SFrame or CFI "RA undefined" row, a
// zero return address, or a zero saved frame pointer (one the step that
// found the frame loaded from the stack: a zero the register merely kept
// through frames that did not save it, in code without unwind information
// or frame pointers, stops the walk with ErrZeroFP). Otherwise Stack.Err is a
// *StepError naming the frame, the PC, the method and the address involved,
// wrapping one of this package's sentinels (errors.go) whichever method
// failed: a Fallback Stepper reports its failures in the same vocabulary.
//
// # Guards
//
// Untrusted stack bytes must not make a walk loop or run away: the
// caller's SP must be above the callee's (equal only in the topmost
// frame), 8-aligned and, when Options.Stack is set, inside the thread's
// stack; a frame pointer must not be below SP; the walk stops at
// Options.MaxDepth frames (DefaultMaxDepth). Registers restored from a
// signal frame skip the SP checks (the interrupted code may run on
// another stack than its handler's, with sigaltstack); from there on the
// walk is bounded by the interrupted SP's own stack (Options.StackOf), or
// unbounded when that is not known; MaxDepth still bounds the walk.
package unwind
