package unwind

import (
	"codeberg.org/stacktop/stacktop/cfi"
	"codeberg.org/stacktop/stacktop/regs"
)

// CFIFinder is what the walker needs of a module's DWARF CFI (.eh_frame,
// .debug_frame): the row that applies at an ELF virtual address.
// *cfi.Table satisfies it. Lookup returns cfi.ErrNoFDE when no FDE covers
// the address; any other error is a corrupt table.
type CFIFinder interface {
	Lookup(pc uint64) (cfi.Row, error)
}

// calleeSaved says which registers keep their value across a call, so a
// register that a CFI row leaves unspecified is still known in the caller
// (the System V psABIs: rbx, rbp, r12-r15 on x86-64; x19-x29 and sp on
// aarch64; r6-r13, r15 and f8-f15 on s390x). Any other unspecified
// register is lost.
func calleeSaved(a regs.Arch) uint64 {
	switch a {
	case regs.AMD64:
		return 1<<3 | 1<<6 | 1<<12 | 1<<13 | 1<<14 | 1<<15 | 1<<regs.AMD64RSP
	case regs.ARM64:
		var m uint64
		for r := 19; r <= 29; r++ {
			m |= 1 << r
		}
		return m | 1<<regs.ARM64SP
	case regs.S390X:
		// r6-r13, r15, and f8-f15 (DWARF 24-31 number f8, f10, f12, f14,
		// f9, f11, f13, f15).
		var m uint64
		for r := 6; r <= 13; r++ {
			m |= 1 << r
		}
		for r := 24; r <= 31; r++ {
			m |= 1 << r
		}
		return m | 1<<regs.S390XSP
	}
	return 0
}

// evalCFI computes the caller's registers from a CFI row: the CFA
// (register+offset or an expression), the caller's SP (the CFA), the
// return address and every register the row has a rule for; callee-saved
// registers without a rule keep their value.
func (w *Walker) evalCFI(cur, next *regs.Set, row *cfi.Row, topmost bool) (bool, stepFail) {
	a := cur.Arch
	if row.RA.Kind == cfi.RuleUndefined {
		return true, stepFail{} // the outermost frame (_start, clone3's child)
	}
	if !topmost && (row.RA.Kind == cfi.RuleUnspecified || row.RA.Kind == cfi.RuleSameValue) {
		return false, stepFail{err: ErrRANotSaved}
	}
	sp, _ := cur.Get(a.SPReg())
	var cfa uint64
	switch row.CFA.Kind {
	case cfi.RuleCFA:
		base, ok := cur.Get(int(row.CFA.Reg))
		if !ok {
			return false, stepFail{err: ErrRegUnknown}
		}
		cfa = base + uint64(row.CFA.Offset)
	case cfi.RuleCFAExpression:
		v, err := cfi.Eval(row.CFA, cur, 0, w.readWord)
		if err != nil {
			return false, stepFail{err: ErrBadRule, cause: err}
		}
		cfa = v
	default:
		return false, stepFail{err: ErrBadRule}
	}
	spCaller := cfa + uint64(spValOffset(a))
	if f := w.checkSP(spCaller, sp, topmost); f.err != nil {
		return false, f
	}

	ra, ok, f := w.evalCFIRule(cur, row.RA, int(row.RAReg), cfa)
	if f.err != nil {
		return false, f
	}
	if !ok {
		return false, stepFail{err: ErrRegUnknown}
	}
	if row.RAMangled {
		ra &^= w.opts.PACMask
	}

	// Compute every rule before writing next: rules read cur's registers.
	keep := cur.Valid & calleeSaved(a)
	var vals [regs.NumDWARF]uint64
	var known uint64
	for _, rr := range row.Regs {
		n := int(rr.Reg)
		if n >= regs.NumDWARF {
			continue
		}
		keep &^= 1 << n
		v, ok, f := w.evalCFIRule(cur, rr.Rule, n, cfa)
		if f.err != nil {
			return false, f
		}
		if ok {
			vals[n], known = v, known|1<<n
		}
	}
	reset(next, a, ra)
	for n := 0; n < regs.NumDWARF; n++ {
		switch {
		case known&(1<<n) != 0:
			next.Put(n, vals[n])
		case keep&(1<<n) != 0:
			next.Put(n, cur.R[n])
		}
	}
	next.Put(a.SPReg(), spCaller)
	return false, stepFail{}
}

// evalCFIRule evaluates one register rule; ok is false when the rule
// leaves the register without a value.
func (w *Walker) evalCFIRule(cur *regs.Set, r cfi.Rule, reg int, cfa uint64) (uint64, bool, stepFail) {
	switch r.Kind {
	case cfi.RuleUnspecified, cfi.RuleSameValue:
		v, ok := cur.Get(reg)
		return v, ok, stepFail{}
	case cfi.RuleUndefined:
		return 0, false, stepFail{}
	case cfi.RuleOffset:
		v, f := w.word(cfa + uint64(r.Offset))
		return v, f.err == nil, f
	case cfi.RuleValOffset:
		return cfa + uint64(r.Offset), true, stepFail{}
	case cfi.RuleRegister:
		v, ok := cur.Get(int(r.Reg))
		return v, ok, stepFail{}
	case cfi.RuleExpression, cfi.RuleValExpression:
		v, err := cfi.Eval(r, cur, cfa, w.readWord)
		if err != nil {
			return 0, false, stepFail{err: ErrBadRule, cause: err}
		}
		if r.Kind == cfi.RuleValExpression {
			return v, true, stepFail{}
		}
		v, f := w.word(v)
		return v, f.err == nil, f
	}
	return 0, false, stepFail{err: ErrBadRule}
}

// readWord adapts word to cfi.ReadWord for expression evaluation.
func (w *Walker) readWord(addr uint64) (uint64, error) {
	v, f := w.word(addr)
	if f.err != nil {
		return 0, &StepError{Addr: addr, Err: f.err, Cause: f.cause}
	}
	return v, nil
}

// Signal frames. After a signal handler returns, its return address is the
// signal trampoline (glibc's __restore_rt on x86-64, the vDSO's
// __kernel_rt_sigreturn on aarch64), whose SP points at the kernel's
// signal frame. That frame holds every general register of the interrupted
// code, which may have been anywhere (a leaf, a prologue): its PC is exact.
var (
	// mov $15, %rax; syscall (rt_sigreturn)
	sigreturnAMD64 = []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}
	// mov x8, #139; svc #0
	sigreturnARM64 = []byte{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}
)

// Signal frame layouts, from the kernel's uapi headers.
const (
	// x86-64: the handler's ret popped rt_sigframe.pretcode, so SP is the
	// struct ucontext: uc_flags, uc_link, uc_stack (24 bytes), then
	// uc_mcontext, a struct sigcontext_64: r8-r15, rdi, rsi, rbp, rbx,
	// rdx, rax, rcx, rsp, rip.
	amd64MContext = 40
	// aarch64: SP is struct rt_sigframe { siginfo (128 bytes); ucontext }.
	// In ucontext, uc_mcontext follows uc_flags, uc_link, uc_stack,
	// uc_sigmask and 120 bytes of padding, 16-aligned: at 176. Its struct
	// sigcontext is fault_address, regs[31], sp, pc.
	arm64SigContext = 128 + 176
)

// amd64SigcontextRegs lists the DWARF numbers of sigcontext_64's first 16
// words, in order; rip follows.
var amd64SigcontextRegs = [...]int{8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 6, 3, 1, 0, 2, regs.AMD64RSP}

// isSigreturn reports whether the code at pc is a signal trampoline.
func (w *Walker) isSigreturn(a regs.Arch, pc uint64) bool {
	var want []byte
	switch a {
	case regs.AMD64:
		want = sigreturnAMD64
	case regs.ARM64:
		want = sigreturnARM64
	case regs.S390X:
		want = svcRtSigreturnS390X // or svc 119 (zarch_signal.go)
	default:
		return false
	}
	if w.mem == nil || pc > 1<<63 {
		return false
	}
	// Code does not change under a running program, and reading it costs a
	// system call on a live target: remember the answer per PC. The cache
	// is bounded; code mapped later at a reused address is rare enough to
	// pay one wrong answer before the next reset.
	if is, ok := w.sigreturn[pc]; ok {
		return is
	}
	if w.sigreturn == nil || len(w.sigreturn) >= maxSigreturnCache {
		w.sigreturn = make(map[uint64]bool)
	}
	b := w.code[:len(want)]
	n, _ := w.mem.ReadAt(b, int64(pc))
	is := n == len(b) && (string(b) == string(want) || (a == regs.S390X && string(b) == string(svcSigreturnS390X)))
	w.sigreturn[pc] = is
	return is
}

// maxSigreturnCache bounds Walker.sigreturn.
const maxSigreturnCache = 4096

// signalStep restores the interrupted code's registers from the signal
// frame at cur's SP. The result skips the SP guards: the interrupted SP may
// be on another stack (sigaltstack), and MaxDepth still bounds the walk.
func (w *Walker) signalStep(cur, next *regs.Set) stepFail {
	a := cur.Arch
	sp, ok := cur.Get(a.SPReg())
	if !ok {
		return stepFail{err: ErrRegUnknown}
	}
	switch a {
	case regs.AMD64:
		var vals [len(amd64SigcontextRegs) + 1]uint64
		for i := range vals {
			v, f := w.word(sp + amd64MContext + 8*uint64(i))
			if f.err != nil {
				return f
			}
			vals[i] = v
		}
		reset(next, a, vals[len(vals)-1])
		for i, n := range amd64SigcontextRegs {
			next.Put(n, vals[i])
		}
	case regs.ARM64:
		base := sp + arm64SigContext + 8 // skip fault_address
		var vals [33]uint64              // x0-x30, sp, pc
		for i := range vals {
			v, f := w.word(base + 8*uint64(i))
			if f.err != nil {
				return f
			}
			vals[i] = v
		}
		reset(next, a, vals[32])
		for n := 0; n <= 31; n++ {
			next.Put(n, vals[n])
		}
	case regs.S390X:
		if f := w.s390xSignalStep(cur, next, sp); f.err != nil {
			return f
		}
	default:
		return stepFail{err: ErrSignalFrame}
	}
	if next.SP() == 0 || next.PC == 0 {
		return stepFail{err: ErrSignalFrame, addr: sp}
	}
	return stepFail{}
}
