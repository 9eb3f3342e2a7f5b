package unwind

// This file is the package's public contract: the walker (unwind.go), the
// sampler that feeds it live threads and the tests that feed it snapshots are
// written against it.

import (
	"encoding/binary"
	"io"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// Method says how a frame was found.
type Method uint8

const (
	MethodRegs      Method = iota // frame 0: the thread's own registers
	MethodSFrame                  // an SFrame row of the callee
	MethodCFI                     // DWARF CFI (.eh_frame / .debug_frame)
	MethodFP                      // the frame-pointer chain
	MethodBackChain               // the s390x back chain
	MethodSignal                  // a signal frame (sigcontext)
	MethodLinkReg                 // frame 0's caller from the link register (x30, r14) of a leaf
	MethodTailCall                // a function a tail call removed, rebuilt from DWARF call sites (not a walk step)
	MethodGoStack                 // the goroutine's frame a Go runtime stack switch (systemstack, morestack, mcall) left, from g.sched
)

func (m Method) String() string {
	switch m {
	case MethodRegs:
		return "regs"
	case MethodSFrame:
		return "sframe"
	case MethodCFI:
		return "cfi"
	case MethodFP:
		return "fp"
	case MethodBackChain:
		return "backchain"
	case MethodSignal:
		return "signal"
	case MethodLinkReg:
		return "lr"
	case MethodTailCall:
		return "tailcall"
	case MethodGoStack:
		return "gostack"
	}
	return "unknown"
}

// Frame is one frame of a stack. PC is the thread's PC for frame 0 and the
// return address for callers (as gdb and eu-stack print them); lookups for a
// caller use PC-1 unless the frame follows a signal frame (Exact).
type Frame struct {
	PC     uint64
	SP     uint64 // the frame's stack pointer (its CFA minus the ABI's offset)
	Method Method
	Exact  bool // PC is an exact instruction address (frame 0, after a signal frame)
}

// Module is what the walker needs of one mapped object: where its
// executable code is, the load bias, and its unwind tables.
type Module struct {
	Start, End uint64          // executable address range [Start, End)
	Bias       uint64          // runtime address = ELF virtual address + Bias
	SFrame     *sframe.Section // nil when the object has no .sframe
	Path       string
	IsVDSO     bool
	// Rows, when non-nil, is used instead of SFrame: a cache of decoded
	// rows, or a test fake. Like SFrame it is keyed by ELF virtual address
	// (runtime PC minus Bias).
	Rows RowFinder
	// CFI, when non-nil, is the module's DWARF CFI (a *cfi.Table, or a
	// test fake), keyed by ELF virtual address like SFrame. It is tried
	// for a PC no SFrame row covers, before frame pointers.
	CFI CFIFinder
}

// RowFinder is what the walker needs of an unwind table: the row that
// applies at an ELF virtual address. *sframe.Section satisfies it. Lookup
// returns an error wrapping sframe.ErrNoFunc when nothing covers the
// address; any other error is a corrupt table.
type RowFinder interface {
	Lookup(pc uint64) (sframe.Row, error)
}

// Stepper is an unwinding method other than SFrame and CFI, tried for a
// frame neither covers. The s390x back chain plugs in here. Step returns the
// caller's registers (at least PC and SP; FP when known) or ErrOutermost;
// the walker applies its own SP guards to the result. A step that fails
// returns a *StepError wrapping one of this package's sentinels (ErrMemory,
// ErrMisaligned, ErrBadRA, ...), which becomes Stack.Err; any other error
// ends the walk with ErrNoUnwindInfo caused by it. order is the target's
// byte order for reading words from mem.
type Stepper interface {
	Step(cur *regs.Set, topmost bool, mem Memory, order binary.ByteOrder) (regs.Set, error)
	Method() Method
}

// StackSwitcher follows a switch of stacks the unwind tables do not
// describe: a Go thread running runtime.systemstack's callee on its system
// stack (g0) returns, through systemstack, to the goroutine whose saved
// context (g.sched) says where that goroutine's stack continues. The walker
// asks it before each step; SwitchNone means cur is no such frame. thread
// is frame 0's set (its TLS and registers locate the current goroutine);
// exact as for a step. bounds is the extent of the stack the walk goes on
// with (its SP checks use it from then on).
type StackSwitcher interface {
	SwitchStack(thread, cur *regs.Set, exact bool, mem Memory, order binary.ByteOrder, next *regs.Set) (bounds StackBounds, sw Switch)
}

// Switch is a StackSwitcher's answer.
type Switch uint8

const (
	SwitchNone   Switch = iota // not a switch: step cur as usual
	SwitchRegs                 // cur's SP and FP now describe its frame on the other stack: step it as usual from there
	SwitchCaller               // next holds cur's caller (PC, SP, FP), on the other stack
)

// Modules finds the module whose executable range holds an address. A PC
// with no module is outside every executable mapping: the walk ends there.
type Modules interface {
	ModuleAt(pc uint64) (*Module, bool)
}

// Memory reads the target's memory. io.ReaderAt, so a live process
// (process_vm_readv), a captured stack window or a test buffer all fit.
type Memory = io.ReaderAt

// Stack bounds the walk: every recovered SP must lie in [Low, High) when
// High is non-zero (the thread's stack mapping).
type StackBounds struct {
	Low, High uint64
}

// StackFinder returns the bounds of the stack that holds sp (its mapping),
// or false when none is known.
type StackFinder func(sp uint64) (StackBounds, bool)

// Options tune one walk.
type Options struct {
	MaxDepth int // 0 means DefaultMaxDepth
	Stack    StackBounds
	// StackOf, when set, bounds the frames a signal frame interrupted
	// that run on another stack than the handler's (sigaltstack): their
	// SP is checked against its own mapping, not Stack. Without it such
	// frames are walked without a stack bound (MaxDepth still applies).
	StackOf StackFinder
	// NoFramePointer disables the frame-pointer fallback (for tests that
	// must prove a path is SFrame-only). It disables Fallback too.
	NoFramePointer bool
	// NoCFI skips DWARF CFI, so a walk shows what SFrame and frame
	// pointers alone recover (dump --no-cfi; tests of those paths).
	NoCFI bool
	// PACMask is cleared from aarch64 return addresses that carry a
	// pointer-authentication code (SFrame MangledRA rows, and every
	// frame-pointer step on arm64): the insn_mask of NT_ARM_PAC_MASK.
	// 0 strips nothing.
	PACMask uint64
	// ByteOrder of the target's memory; nil means the arch's Linux default
	// (little-endian amd64 and arm64, big-endian s390x). Set it for
	// aarch64 big-endian (SFrame ABI 1).
	ByteOrder binary.ByteOrder
	// Fallback, when non-nil, replaces the built-in frame-pointer fallback
	// (s390x has none: without a Fallback its walk stops where SFrame does).
	Fallback Stepper
	// Unwinders, when non-nil, is the ordered list of methods a walk may
	// use (the user's --unwinder): per frame the first that describes it
	// answers. nil means DefaultUnwinders of the arch. MethodFP is the
	// built-in frame-pointer step (amd64, arm64) or a Fallback whose
	// Method is MethodFP; MethodBackChain is a Fallback whose Method is
	// MethodBackChain. NoCFI and NoFramePointer remove methods from it.
	Unwinders []Method
	// FuncAt, when non-nil, gives the [start, end) of the function
	// holding a PC (from the module's symbols). The frame-0 link-register
	// rule needs it: without unwind tables, x30 is taken as the caller
	// only when it returns into another function than the PC's, after a
	// call instruction, and the function has not saved it.
	FuncAt func(pc uint64) (start, end uint64, ok bool)
	// Switch, when non-nil, follows stack switches of a language
	// runtime (Go's systemstack, morestack and mcall; see gort/) before the
	// ordinary methods are asked; its frames have MethodGoStack.
	Switch StackSwitcher
}

// DefaultMaxDepth bounds a walk's frames when Options.MaxDepth is 0. Real
// programs do not reach it (a CPython program 150-200 C levels deep holds
// some 1,600 frames; gdb has no cap), and it still bounds in time a walk
// of a hostile stack; the loop guard that ends a cyclic walk is the rule
// that each caller's SP is above its callee's (ErrSPNotIncreasing), not
// this cap.
const DefaultMaxDepth = 4096

// MaxMaxDepth is the most Options.MaxDepth a caller should ask for: the
// frames of one walk are kept in memory, 32 bytes each.
const MaxMaxDepth = 1 << 20

// Stack is the result of one walk. Complete is true when the walk reached
// the outermost frame (an SFrame or CFI RA-undefined row, a zero return
// address or frame pointer at the base of the stack); otherwise Err says why it stopped.
type Stack struct {
	Frames   []Frame
	Complete bool
	Err      error
	// LookupErr is the first unwind-table error (a corrupt .sframe, not a
	// PC without a row) met during the walk; those steps fell back to frame
	// pointers, so the walk may still be Complete.
	LookupErr error
}

// Arch is re-exported for callers that only import unwind.
type Arch = regs.Arch
