package unwind

import (
	"errors"
	"fmt"
)

// Why a walk, or one Stepper's step, stopped: the one vocabulary of a
// failed unwinding step, whichever method failed (the walker's SFrame, CFI
// and frame-pointer steps, and Steppers such as package backchain).
// Stack.Err is a *StepError wrapping one of these, so callers test with
// errors.Is and read the frame, PC and address from the StepError.
var (
	// ErrNoModule: the PC is outside every executable mapping.
	ErrNoModule = errors.New("pc outside executable mappings")
	// ErrMaxDepth: the walk reached Options.MaxDepth frames.
	ErrMaxDepth = errors.New("maximum depth reached")
	// ErrNoUnwindInfo: no SFrame row covers the PC and no fallback applies
	// (Options.NoFramePointer, or s390x without Options.Fallback).
	ErrNoUnwindInfo = errors.New("no unwind information")
	// ErrSPNotIncreasing: the caller's SP is not above the callee's (the
	// loop guard; equal is allowed in the topmost frame only).
	ErrSPNotIncreasing = errors.New("caller stack pointer does not increase")
	// ErrMisaligned: a recovered SP, a frame pointer or a back chain is
	// not 8-aligned.
	ErrMisaligned = errors.New("misaligned stack or frame pointer")
	// ErrOutsideStack: a recovered SP is outside Options.Stack.
	ErrOutsideStack = errors.New("stack pointer outside the thread's stack")
	// ErrBadFP: a frame pointer used as a base is below the SP.
	ErrBadFP = errors.New("frame pointer below stack pointer")
	// ErrZeroFP: a frame without unwind information has a zero frame
	// pointer that no frame record holds (the register kept whatever the
	// code left in it): it does not prove the end of the stack.
	ErrZeroFP = errors.New("zero frame pointer without unwind information")
	// ErrRANotSaved: the row says the return address is still in its
	// register, which only the topmost frame's registers can tell.
	ErrRANotSaved = errors.New("return address in register outside the topmost frame")
	// ErrRegUnknown: a rule needs a register this frame does not know.
	ErrRegUnknown = errors.New("register not known in this frame")
	// ErrBadRule: a rule the walker cannot evaluate (a CFA not based on a
	// register, a value rule for the return address).
	ErrBadRule = errors.New("unsupported unwind rule")
	// ErrMemory: reading the target's memory failed.
	ErrMemory = errors.New("memory read failed")
	// ErrBadRA: a return address read from the stack cannot be one (zero,
	// misaligned for the architecture, or not in executable code).
	ErrBadRA = errors.New("implausible return address")
	// ErrSignalFrame: a signal frame on an architecture whose layout the
	// walker does not know, or one holding a zero PC or SP.
	ErrSignalFrame = errors.New("signal frame not supported")
	// ErrArch: the register set's architecture is unknown.
	ErrArch = errors.New("unsupported architecture")
	// ErrOutermost is returned by a Stepper for the outermost frame.
	ErrOutermost = errors.New("outermost frame")
)

// StepError says where a walk stopped: Frame is the index of the frame
// whose caller could not be recovered (or, for ErrNoModule and
// ErrMaxDepth, of the frame that would have been added), PC its program
// counter, Method the method that failed or produced the bad PC, Addr the
// address involved (a memory read, a bad SP or FP) when non-zero. A
// Stepper returns one too (Frame is then 0: the walker, which knows the
// index, fills it in and keeps the rest).
type StepError struct {
	Frame  int
	PC     uint64
	Method Method
	Addr   uint64
	What   string // the word read or checked, when the method names it ("saved r14"); may be empty
	Err    error  // one of the sentinels above
	Cause  error  // underlying error (memory reader, unwind table), may be nil
}

func (e *StepError) Error() string {
	s := fmt.Sprintf("unwind: frame %d (pc %#x, %v): %v", e.Frame, e.PC, e.Method, e.Err)
	if e.What != "" {
		s += " (" + e.What + ")"
	}
	if e.Addr != 0 {
		s += fmt.Sprintf(" at %#x", e.Addr)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *StepError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}
