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
// Fallback for anything above the window. Walk (the function) is the
// one-shot form.
//
// # One step
//
// Frame 0 is the registers (MethodRegs, Exact). For each frame the walker
// finds the PC's module (none ends the walk: ErrNoModule), looks the PC up
// in the module's rows (the exact PC for frame 0, the return address minus
// one for callers, so that a call at the very end of a function is not
// attributed to the next one), and evaluates the row as the proposed Linux
// kernel SFrame unwinder does: CFA from SP, FP or a known register (FP
// only if FP >= SP), caller SP = CFA + the ABI's offset (-160 on s390x),
// return address and FP from their rules, a PAC stripped from aarch64
// return addresses marked mangled. A row whose return address is still in
// its register only describes the topmost frame. When no row covers the PC
// the walker falls back to frame pointers on amd64 and arm64, or to
// Options.Fallback (the hook for the s390x back chain); a corrupt table is
// recorded in Stack.LookupErr and also falls back.
//
// Every frame says how it was found (Frame.Method). Stack.Complete is set
// only at a true outermost frame: an SFrame "RA undefined" row, a zero
// return address, or a zero saved frame pointer. Otherwise Stack.Err is a
// *StepError naming the frame, the PC, the method and the address involved.
//
// # Guards
//
// Untrusted stack bytes must not make a walk loop or run away: the
// caller's SP must be above the callee's (equal only in the topmost
// frame), 8-aligned and, when Options.Stack is set, inside the thread's
// stack; a frame pointer must not be below SP; the walk stops at
// Options.MaxDepth frames (DefaultMaxDepth).
package unwind
