package unwind

// This file is the package's public contract: the walker (unwind.go), the
// sampler that feeds it live threads and the tests that feed it snapshots are
// written against it.

import (
	"io"

	"stacktop/regs"
	"stacktop/sframe"
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
}

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

// Options tune one walk.
type Options struct {
	MaxDepth int // 0 means DefaultMaxDepth
	Stack    StackBounds
	// NoFramePointer disables the frame-pointer fallback (for tests that
	// must prove a path is SFrame-only).
	NoFramePointer bool
}

const DefaultMaxDepth = 256

// Stack is the result of one walk. Complete is true when the walk reached
// the outermost frame (an SFrame RA-undefined row, a zero return address or
// frame pointer at the base of the stack); otherwise Err says why it stopped.
type Stack struct {
	Frames   []Frame
	Complete bool
	Err      error
}

// Arch is re-exported for callers that only import unwind.
type Arch = regs.Arch
