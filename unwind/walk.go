package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"codeberg.org/stacktop/stacktop/cfi"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// ErrTable marks Stack.LookupErr: an unwind table lookup failed for a
// reason other than "no function covers the PC".
var ErrTable = errors.New("corrupt unwind table")

// Walker walks stacks. It keeps its frame buffer and a scratch word
// between walks, so a sampler that reuses one Walker per goroutine
// allocates nothing on a successful walk. A Walker is not safe for
// concurrent use.
type Walker struct {
	frames []Frame
	buf    [8]byte // scratch for Memory.ReadAt; a field so it does not escape per read
	code   [16]byte
	// sigreturn caches whether the code at a PC is a signal trampoline.
	sigreturn map[uint64]bool
	// The callee's and the caller's registers of the current step; fields,
	// because a Stepper gets pointers to them (which would make locals
	// escape), and two so a step swaps pointers instead of copying.
	sets [2]regs.Set
	// thread is frame 0's set, for Options.Switch (the thread's TLS).
	thread regs.Set

	// fpLoaded tells whether the current frame's FP was loaded by the step
	// that found the frame (from a frame record, a saved register slot or
	// a signal frame), not kept from its callee: only a loaded zero FP
	// proves the end of a frame-pointer chain.
	fpLoaded bool

	// Set for the duration of one walk.
	mem       Memory
	order     binary.ByteOrder
	mods      Modules
	methods   []Method  // the unwinders of this walk, in order (walkOrder)
	orderBuf  [4]Method // backing store of methods
	opts      Options
	lookupErr error
}

// Walk unwinds the stack of the thread whose registers are r. It allocates
// a fresh frame slice; use a Walker on hot paths.
func Walk(r regs.Set, mem Memory, mods Modules, opts Options) Stack {
	var w Walker
	return w.Walk(r, mem, mods, opts)
}

// stepFail is a step's failure, kept as a value so the success path does
// not allocate; the walk loop turns it into a *StepError.
type stepFail struct {
	err   error // sentinel; nil means no failure
	addr  uint64
	cause error // or a stepperFail
}

// stepperFail is the cause of a stepFail that a Stepper's *StepError
// became: it carries the Stepper's What and Cause to the walk's StepError
// without making every step's stepFail larger.
type stepperFail struct{ *StepError }

// stepError is f as the walk's error: frame idx at pc, found by method.
func (f stepFail) stepError(idx int, pc uint64, method Method) *StepError {
	se := &StepError{Frame: idx, PC: pc, Method: method, Addr: f.addr, Err: f.err, Cause: f.cause}
	if sf, ok := f.cause.(stepperFail); ok {
		se.What, se.Cause = sf.What, sf.Cause
	}
	return se
}

// Walk unwinds the stack of the thread whose registers are r. The
// returned Stack.Frames aliases the Walker's buffer: it is valid until
// the next call to Walk.
func (w *Walker) Walk(r regs.Set, mem Memory, mods Modules, opts Options) Stack {
	w.frames = w.frames[:0]
	w.mem, w.opts, w.lookupErr, w.mods, w.fpLoaded = mem, opts, nil, mods, false
	w.order = opts.ByteOrder
	if w.order == nil {
		w.order = ByteOrder(r.Arch)
	}
	defer w.release()
	w.methods = w.walkOrder(r.Arch)

	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}

	var st Stack
	w.sets[0] = r
	if opts.Switch != nil {
		w.thread = r
	}
	cur := &w.sets[0]
	sp, spOK := cur.Get(cur.Arch.SPReg())
	w.frames = append(w.frames, Frame{PC: cur.PC, SP: sp, Method: MethodRegs, Exact: true})
	switch {
	case cur.Arch.SPReg() < 0:
		st.Err = &StepError{PC: cur.PC, Method: MethodRegs, Err: ErrArch}
		return w.result(st)
	case !spOK:
		st.Err = &StepError{PC: cur.PC, Method: MethodRegs, Err: ErrRegUnknown}
		return w.result(st)
	}
	mod, ok := mods.ModuleAt(cur.PC)
	if !ok {
		st.Err = &StepError{PC: cur.PC, Method: MethodRegs, Err: ErrNoModule}
		return w.result(st)
	}
	if opts.ByteOrder == nil && mod.SFrame != nil && mod.SFrame.Header().ABI == sframe.ABIAArch64BigEndian {
		// The register set says arm64, which is little-endian on Linux but
		// for this one ABI; the SFrame header of the thread's code knows.
		w.order = binary.BigEndian
	}

	next := &w.sets[1]
	// exact: cur's PC is an instruction address and its registers are all
	// known (frame 0, and the frame a signal interrupted), so rows that
	// only describe an innermost frame apply.
	for exact := true; ; {
		idx := len(w.frames) - 1
		// Frame 0's PC is exact; a caller's PC is a return address, so its
		// call instruction (and its unwind row) is at PC-1: after a
		// noreturn call the return address can be the next function.
		var (
			method    Method
			outermost bool
			f         stepFail
			sw        Switch
			bounds    StackBounds
		)
		if w.opts.Switch != nil {
			bounds, sw = w.opts.Switch.SwitchStack(&w.thread, cur, exact, w.mem, w.order, next)
		}
		if sw != SwitchNone {
			// The caller runs on the goroutine's stack, not the system
			// stack the walk's bounds describe.
			w.opts.Stack = bounds
		}
		switch sw {
		case SwitchCaller:
			method = MethodGoStack
		case SwitchRegs:
			method, outermost, f = w.step(cur, next, mod, exact, exact)
			if f.err == nil && method != MethodSignal {
				method = MethodGoStack
			}
		default:
			method, outermost, f = w.step(cur, next, mod, exact, exact)
		}
		if f.err != nil {
			st.Err = f.stepError(idx, cur.PC, method)
			break
		}
		if outermost || next.PC == 0 {
			st.Complete = true
			break
		}
		npc := next.PC - 1
		if method == MethodSignal {
			npc = next.PC
		}
		nmod, ok := mods.ModuleAt(npc)
		if !ok {
			st.Err = &StepError{Frame: idx + 1, PC: next.PC, Method: method, Err: ErrNoModule}
			break
		}
		if len(w.frames) >= maxDepth {
			st.Err = &StepError{Frame: idx + 1, PC: next.PC, Method: method, Err: ErrMaxDepth,
				What: fmt.Sprintf("the limit is %d frames", maxDepth)}
			break
		}
		exact = method == MethodSignal
		if exact {
			w.boundSignalFrame(next.SP())
		}
		fpWas, _ := cur.Get(cur.Arch.FPReg())
		fpNow, ok := next.Get(next.Arch.FPReg())
		w.fpLoaded = ok && fpNow != fpWas
		w.frames = append(w.frames, Frame{PC: next.PC, SP: next.SP(), Method: method, Exact: exact})
		cur, next, mod = next, cur, nmod
	}
	return w.result(st)
}

// boundSignalFrame re-bounds the walk for the frame a signal interrupted:
// a handler on an alternate stack (sigaltstack) interrupted code on the
// thread's own stack, whose SP the alternate stack's bounds would reject.
func (w *Walker) boundSignalFrame(sp uint64) {
	b := w.opts.Stack
	if b.High == 0 || (sp >= b.Low && sp < b.High) {
		return
	}
	w.opts.Stack = StackBounds{}
	if w.opts.StackOf != nil {
		if nb, ok := w.opts.StackOf(sp); ok {
			w.opts.Stack = nb
		}
	}
}

func (w *Walker) result(st Stack) Stack {
	st.Frames = w.frames
	st.LookupErr = w.lookupErr
	return st
}

// release drops the references a walk took, so an idle Walker does not
// keep a process's memory reader or tables alive.
func (w *Walker) release() {
	w.mem, w.opts, w.order, w.lookupErr, w.methods, w.mods = nil, Options{}, nil, nil, nil, nil
}

// step recovers the caller of cur into next, asking the walk's unwinders
// in order (by default: the SFrame row of cur's PC, its CFI row, then frame
// pointers or opts.Fallback); a signal trampoline recognised by its code is
// followed before the first stack-chain method (or after the tables when
// none is allowed). A signal frame (an SFrame or CFI row marked as one, or
// the trampoline's code) is evaluated from the kernel's signal frame, and
// returns MethodSignal.
func (w *Walker) step(cur, next *regs.Set, mod *Module, exact, topmost bool) (Method, bool, stepFail) {
	lookup := cur.PC
	if !exact {
		lookup--
	}
	// A CFI row needing a register this frame does not know is kept while a
	// later method is tried; it is the answer if none has one.
	var cfiFail stepFail
	cfiTried, trampoline := false, false
	for _, m := range w.methods {
		switch m {
		case MethodSFrame:
			if method, outermost, f, ok := w.trySFrame(cur, next, mod, lookup, topmost); ok {
				return method, outermost, f
			}
		case MethodCFI:
			method, outermost, f, ok := w.tryCFI(cur, next, mod, lookup, topmost)
			if !ok {
				continue
			}
			if method == MethodCFI && errors.Is(f.err, ErrRegUnknown) {
				cfiFail, cfiTried = f, true
				continue
			}
			return method, outermost, f
		case MethodFP, MethodBackChain:
			if !trampoline {
				trampoline = true
				if w.isSigreturn(cur.Arch, cur.PC) {
					return MethodSignal, false, w.signalStep(cur, next)
				}
			}
			if method, outermost, f, ok := w.tryChain(m, cur, next, mod, topmost); ok {
				return method, outermost, f
			}
		}
	}
	if cfiTried {
		return MethodCFI, false, cfiFail
	}
	if !trampoline && w.isSigreturn(cur.Arch, cur.PC) {
		return MethodSignal, false, w.signalStep(cur, next)
	}
	first := MethodSFrame
	if len(w.methods) > 0 {
		first = w.methods[0]
	}
	return first, false, stepFail{err: ErrNoUnwindInfo, cause: w.notCovered()}
}

// notCovered is the cause of a walk that ends because no allowed method
// describes a frame; made once per walk, on failure only.
func (w *Walker) notCovered() error {
	return &NotCoveredError{Allowed: append([]Method(nil), w.methods...)}
}

// trySFrame steps with the SFrame row of the PC; ok is false when the
// module has no row for it (or its table is corrupt, which is noted).
func (w *Walker) trySFrame(cur, next *regs.Set, mod *Module, lookup uint64, topmost bool) (Method, bool, stepFail, bool) {
	rf := mod.rowFinder()
	if rf == nil {
		return 0, false, stepFail{}, false
	}
	row, err := rf.Lookup(lookup - mod.Bias)
	switch {
	case err == nil:
		if row.Signal {
			return MethodSignal, false, w.signalStep(cur, next), true
		}
		outermost, f := w.evalRow(cur, next, &row, topmost)
		return MethodSFrame, outermost, f, true
	case errors.Is(err, sframe.ErrNoFunc):
	default:
		// A corrupt table: remember it and try the next method, as the
		// kernel falls back to frame pointers for any failed lookup.
		w.noteLookupErr(cur, MethodSFrame, err)
	}
	return 0, false, stepFail{}, false
}

// tryCFI steps with the module's DWARF CFI row of the PC; ok is false
// when no FDE covers it (or the table is corrupt, which is noted).
func (w *Walker) tryCFI(cur, next *regs.Set, mod *Module, lookup uint64, topmost bool) (Method, bool, stepFail, bool) {
	if mod.CFI == nil {
		return 0, false, stepFail{}, false
	}
	row, err := mod.CFI.Lookup(lookup - mod.Bias)
	switch {
	case err == nil:
		if row.Signal && (cur.Arch == regs.AMD64 || cur.Arch == regs.ARM64 || cur.Arch == regs.S390X) {
			return MethodSignal, false, w.signalStep(cur, next), true
		}
		outermost, f := w.evalCFI(cur, next, &row, topmost)
		return MethodCFI, outermost, f, true
	case errors.Is(err, cfi.ErrNoFDE):
	default:
		w.noteLookupErr(cur, MethodCFI, err)
	}
	return 0, false, stepFail{}, false
}

// tryChain steps with a stack-chain method: opts.Fallback when it is that
// method, else the built-in frame-pointer step on amd64 and arm64; ok is
// false when the architecture has no such chain.
func (w *Walker) tryChain(m Method, cur, next *regs.Set, mod *Module, topmost bool) (Method, bool, stepFail, bool) {
	if fb := w.opts.Fallback; fb != nil && (fb.Method() == m || w.opts.Unwinders == nil) {
		outermost, f := w.fallback(fb, cur, next, topmost)
		return fb.Method(), outermost, f, true
	}
	if m != MethodFP {
		return 0, false, stepFail{}, false
	}
	switch cur.Arch {
	case regs.AMD64, regs.ARM64:
		if topmost && w.leafStep(cur, next, mod) {
			return MethodLinkReg, false, stepFail{}, true
		}
		outermost, f := w.fpStep(cur, next, topmost)
		return MethodFP, outermost, f, true
	}
	return 0, false, stepFail{}, false
}

// noteLookupErr keeps the walk's first unwind-table error.
func (w *Walker) noteLookupErr(cur *regs.Set, m Method, err error) {
	if w.lookupErr == nil {
		w.lookupErr = &StepError{Frame: len(w.frames) - 1, PC: cur.PC, Method: m, Err: ErrTable, Cause: err}
	}
}

func (m *Module) rowFinder() RowFinder {
	if m.Rows != nil {
		return m.Rows
	}
	if m.SFrame != nil {
		return m.SFrame
	}
	return nil
}

// spValOffset is the ABI's SP_caller - CFA: s390x's CFA is the caller's
// SP plus its 160-byte register save area.
func spValOffset(a regs.Arch) int64 {
	if a == regs.S390X {
		return -160
	}
	return 0
}

// evalRow computes the caller's registers from a row, following the
// kernel's unwind_user_next_common: CFA, SP_caller with its sanity checks,
// then RA and FP. Register rules need the register to be known in cur:
// in callers only SP and FP are.
func (w *Walker) evalRow(cur, next *regs.Set, row *sframe.Row, topmost bool) (bool, stepFail) {
	if row.Outermost {
		return true, stepFail{}
	}
	if row.Signal {
		return false, stepFail{err: ErrSignalFrame}
	}
	// A row whose RA is still in its register describes a function that
	// has not called anything yet: it cannot be a caller's row. Say so
	// before the SP check, which would fail too but say less.
	if !topmost && row.RA.Kind == sframe.RuleSame {
		return false, stepFail{err: ErrRANotSaved}
	}
	a := cur.Arch
	sp, _ := cur.Get(a.SPReg())

	if row.CFA.Kind != sframe.RuleReg {
		return false, stepFail{err: ErrBadRule}
	}
	base, ok := cur.Get(int(row.CFA.Reg))
	if !ok {
		return false, stepFail{err: ErrRegUnknown}
	}
	if int(row.CFA.Reg) == a.FPReg() && base < sp {
		return false, stepFail{err: ErrBadFP, addr: base}
	}
	cfa := base + uint64(row.CFA.Offset)
	if row.CFA.Deref {
		v, f := w.word(cfa)
		if f.err != nil {
			return false, f
		}
		cfa = v
	}
	spCaller := cfa + uint64(spValOffset(a))
	if f := w.checkSP(spCaller, sp, topmost); f.err != nil {
		return false, f
	}

	var ra uint64
	switch r := row.RA; {
	case r.Kind == sframe.RuleSame:
		v, ok := cur.Get(a.RAReg())
		if !ok {
			return false, stepFail{err: ErrRegUnknown}
		}
		ra = v
	case r.Kind == sframe.RuleCFA && !r.Deref:
		// "RA = CFA+off" is not an address of anything the callee saved.
		return false, stepFail{err: ErrBadRule}
	default:
		v, f := w.evalSaved(cur, r, cfa)
		if f.err != nil {
			return false, f
		}
		ra = v
	}
	if row.MangledRA {
		ra &^= w.opts.PACMask
	}

	fp, fpOK := cur.Get(a.FPReg())
	if r := row.FP; r.Kind != sframe.RuleSame {
		v, f := w.evalSaved(cur, r, cfa)
		if f.err != nil {
			return false, f
		}
		fp, fpOK = v, true
	}

	reset(next, a, ra)
	next.Put(a.SPReg(), spCaller)
	if fpOK {
		next.Put(a.FPReg(), fp)
	}
	return false, stepFail{}
}

// evalSaved evaluates a RuleCFA or RuleReg rule for a saved value.
func (w *Walker) evalSaved(cur *regs.Set, r sframe.Rule, cfa uint64) (uint64, stepFail) {
	var v uint64
	switch r.Kind {
	case sframe.RuleCFA:
		v = cfa
	case sframe.RuleReg:
		reg, ok := cur.Get(int(r.Reg))
		if !ok {
			return 0, stepFail{err: ErrRegUnknown}
		}
		v = reg
	default:
		return 0, stepFail{err: ErrBadRule}
	}
	v += uint64(r.Offset)
	if r.Deref {
		return w.word(v)
	}
	return v, stepFail{}
}

// fpStep follows the frame-pointer chain one link: on amd64 [rbp] is the
// saved rbp and [rbp+8] the return address; on arm64 the frame record at
// x29 holds x29 and x30 the same way. The caller's SP is FP+16.
func (w *Walker) fpStep(cur, next *regs.Set, topmost bool) (bool, stepFail) {
	a := cur.Arch
	fp, ok := cur.Get(a.FPReg())
	if !ok {
		return false, stepFail{err: ErrRegUnknown}
	}
	if fp == 0 {
		// A zero saved FP ends the chain at the base of the stack (_start
		// and thread entry clear it). In the topmost frame the FP register
		// may just hold data, so there it proves nothing; nor does a zero
		// the frame kept from its callee (code without frame pointers
		// leaves any value there): only a zero loaded from the stack.
		if topmost {
			return false, stepFail{err: ErrBadFP}
		}
		if !w.fpLoaded {
			return false, stepFail{err: ErrZeroFP}
		}
		return true, stepFail{}
	}
	sp, _ := cur.Get(a.SPReg())
	if fp < sp {
		return false, stepFail{err: ErrBadFP, addr: fp}
	}
	if fp%8 != 0 {
		return false, stepFail{err: ErrMisaligned, addr: fp}
	}
	spCaller := fp + 16
	if spCaller < fp {
		return false, stepFail{err: ErrOutsideStack, addr: fp}
	}
	if f := w.checkSP(spCaller, sp, topmost); f.err != nil {
		return false, f
	}
	savedFP, f := w.word(fp)
	if f.err != nil {
		return false, f
	}
	ra, f := w.word(fp + 8)
	if f.err != nil {
		return false, f
	}
	if a == regs.ARM64 {
		ra &^= w.opts.PACMask
	}
	reset(next, a, ra)
	next.Put(a.SPReg(), spCaller)
	next.Put(a.FPReg(), savedFP)
	return false, stepFail{}
}

// reset makes s an empty register set of arch a at pc. The register
// values are left as they were: Valid says which mean anything, and not
// clearing 256 bytes per frame is measurable.
func reset(s *regs.Set, a regs.Arch, pc uint64) {
	s.Arch, s.PC, s.Valid = a, pc, 0
}

// fallback runs a Stepper and applies the walker's SP guards to its result.
func (w *Walker) fallback(fb Stepper, cur, next *regs.Set, topmost bool) (bool, stepFail) {
	n, err := fb.Step(cur, topmost, w.mem, w.order)
	if errors.Is(err, ErrOutermost) {
		return true, stepFail{}
	}
	if err != nil {
		// A Stepper speaks the walker's vocabulary: its *StepError
		// becomes the walk's, with the frame index added.
		if se := (*StepError)(nil); errors.As(err, &se) {
			return false, stepFail{err: se.Err, addr: se.Addr, cause: stepperFail{se}}
		}
		return false, stepFail{err: ErrNoUnwindInfo, cause: err}
	}
	a := cur.Arch
	spCaller, ok := n.Get(a.SPReg())
	if !ok || n.Arch != a {
		return false, stepFail{err: ErrRegUnknown}
	}
	sp, _ := cur.Get(a.SPReg())
	if f := w.checkSP(spCaller, sp, topmost); f.err != nil {
		return false, f
	}
	*next = n
	return false, stepFail{}
}

// checkSP is the loop guard: a caller's SP is above its callee's (equal
// only in the topmost frame, where a function at its entry or an arm64
// leaf has not moved SP), 8-aligned and inside the stack when known.
func (w *Walker) checkSP(spCaller, sp uint64, topmost bool) stepFail {
	if spCaller < sp || (spCaller == sp && !topmost) {
		return stepFail{err: ErrSPNotIncreasing, addr: spCaller}
	}
	if spCaller%8 != 0 {
		return stepFail{err: ErrMisaligned, addr: spCaller}
	}
	if b := w.opts.Stack; b.High != 0 && (spCaller < b.Low || spCaller >= b.High) {
		return stepFail{err: ErrOutsideStack, addr: spCaller}
	}
	return stepFail{}
}

// word reads one target word. Reads inside a StackWindow skip the
// interface call and the copy.
func (w *Walker) word(addr uint64) (uint64, stepFail) {
	if sw, ok := w.mem.(*StackWindow); ok {
		if v, ok := sw.Word(addr, w.order); ok {
			return v, stepFail{}
		}
	}
	if w.mem == nil || addr > math.MaxInt64-8 {
		return 0, stepFail{err: ErrMemory, addr: addr}
	}
	n, err := w.mem.ReadAt(w.buf[:], int64(addr))
	if n != len(w.buf) {
		return 0, stepFail{err: ErrMemory, addr: addr, cause: err}
	}
	return w.order.Uint64(w.buf[:]), stepFail{}
}
