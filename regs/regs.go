// Package regs holds the register set of one stopped thread, for any target
// architecture, in the numbering that unwind tables use (DWARF register
// numbers). It is the neutral type that flows from ptrace (which fills it) to
// unwind (which reads it), so neither package has to know the other.
package regs

import (
	"fmt"
	"runtime"
)

// Arch is a target architecture. It comes from the target (its ELF header or
// register set), never from the host, so a snapshot of an s390x thread can be
// unwound on an x86-64 machine.
type Arch uint8

const (
	ArchUnknown Arch = iota
	AMD64
	ARM64
	S390X
)

func (a Arch) String() string {
	switch a {
	case AMD64:
		return "amd64"
	case ARM64:
		return "arm64"
	case S390X:
		return "s390x"
	}
	return fmt.Sprintf("arch(%d)", uint8(a))
}

// DWARF register numbers the unwinders need, per architecture.
const (
	AMD64RBP = 6
	AMD64RSP = 7

	ARM64FP = 29 // x29
	ARM64LR = 30 // x30
	ARM64SP = 31

	S390XFP = 11 // r11, the ABI's "preferred" frame pointer
	S390XRA = 14 // r14 holds the return address at function entry
	S390XSP = 15
)

// NumDWARF is the number of DWARF-numbered registers a Set can hold:
// amd64 0-16, arm64 0-31, s390x 0-15 (GPRs) and 16-31 (FPRs).
const NumDWARF = 32

// Set is one thread's registers. R is indexed by DWARF register number;
// Valid has bit n set when R[n] is known. After an unwind step only the
// registers the unwinder could recover (SP, FP, and on arm64/s390x the RA
// register) stay valid.
type Set struct {
	Arch  Arch
	PC    uint64
	R     [NumDWARF]uint64
	Valid uint64
	// TLS is the thread pointer of the thread (fs_base on amd64,
	// tpidr_el0 on arm64), 0 when unknown. It is a property of the
	// thread, not of a frame: the walker reads it from frame 0's set to
	// find a Go thread's current goroutine (unwind.StackSwitcher).
	TLS uint64 `json:",omitempty"`
}

// SPReg, FPReg and RAReg return the DWARF numbers of the stack pointer, frame
// pointer and (on architectures that pass it in a register) return-address
// register; RAReg is -1 on amd64, where the return address is on the stack.
func (a Arch) SPReg() int {
	switch a {
	case AMD64:
		return AMD64RSP
	case ARM64:
		return ARM64SP
	case S390X:
		return S390XSP
	}
	return -1
}

func (a Arch) FPReg() int {
	switch a {
	case AMD64:
		return AMD64RBP
	case ARM64:
		return ARM64FP
	case S390X:
		return S390XFP
	}
	return -1
}

func (a Arch) RAReg() int {
	switch a {
	case ARM64:
		return ARM64LR
	case S390X:
		return S390XRA
	}
	return -1
}

// Get returns register n and whether it is known.
func (s *Set) Get(n int) (uint64, bool) {
	if n < 0 || n >= NumDWARF || s.Valid&(1<<uint(n)) == 0 {
		return 0, false
	}
	return s.R[n], true
}

// Put sets register n and marks it valid. Out-of-range numbers are ignored.
func (s *Set) Put(n int, v uint64) {
	if n < 0 || n >= NumDWARF {
		return
	}
	s.R[n] = v
	s.Valid |= 1 << uint(n)
}

// SP returns the stack pointer (zero if unknown).
func (s *Set) SP() uint64 { v, _ := s.Get(s.Arch.SPReg()); return v }

// FP returns the frame pointer (zero if unknown).
func (s *Set) FP() uint64 { v, _ := s.Get(s.Arch.FPReg()); return v }

// Host is the architecture stacktop itself runs on: the one of the
// processes a live back end samples (a 64-bit process of another
// architecture cannot be traced).
func Host() Arch {
	switch runtime.GOARCH {
	case "amd64":
		return AMD64
	case "arm64":
		return ARM64
	case "s390x":
		return S390X
	}
	return ArchUnknown
}
