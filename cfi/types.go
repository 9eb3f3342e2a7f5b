package cfi

import (
	"errors"
	"fmt"
)

// RuleKind says how a register (or the CFA) is recovered in the caller,
// the register rules of DWARF 5 section 6.4.1.
type RuleKind uint8

const (
	// RuleUnspecified: the program says nothing about the register. The
	// unwinder treats it per ABI: callee-saved registers keep their value,
	// others are lost.
	RuleUnspecified   RuleKind = iota
	RuleUndefined              // DW_CFA_undefined: no value (an undefined RA is the outermost frame)
	RuleSameValue              // DW_CFA_same_value
	RuleOffset                 // saved at CFA+Offset
	RuleValOffset              // the value is CFA+Offset
	RuleRegister               // the value is in register Reg
	RuleExpression             // saved at the address Expr computes (the CFA pushed first)
	RuleValExpression          // the value is what Expr computes (the CFA pushed first)
	RuleCFA                    // CFA only: Reg+Offset
	RuleCFAExpression          // CFA only: the value Expr computes (nothing pushed first)
)

func (k RuleKind) String() string {
	switch k {
	case RuleUnspecified:
		return "unspecified"
	case RuleUndefined:
		return "undefined"
	case RuleSameValue:
		return "same"
	case RuleOffset:
		return "offset"
	case RuleValOffset:
		return "val_offset"
	case RuleRegister:
		return "register"
	case RuleExpression:
		return "expression"
	case RuleValExpression:
		return "val_expression"
	case RuleCFA:
		return "cfa"
	case RuleCFAExpression:
		return "cfa_expression"
	}
	return fmt.Sprintf("rule(%d)", uint8(k))
}

// Rule is one column of a CFI row.
type Rule struct {
	Kind   RuleKind
	Reg    uint16 // RuleRegister, RuleCFA
	Offset int64  // RuleOffset, RuleValOffset, RuleCFA
	Expr   []byte // RuleExpression, RuleValExpression, RuleCFAExpression; aliases the section
}

// RegRule is the rule of one register column.
type RegRule struct {
	Reg uint16
	Rule
}

// MaxReg bounds the register columns a Table keeps: the general registers
// of x86-64 (0-16) and aarch64 (0-31). Vector registers are not needed to
// unwind and are dropped.
const MaxReg = 32

// Row is the unwind rule set for the ELF virtual addresses [Start, End).
type Row struct {
	Start, End uint64
	CFA        Rule
	RA         Rule      // the return-address column (the CIE's RA register)
	RAReg      uint16    // that column's register number
	Regs       []RegRule // explicit rules for other columns < MaxReg, by register; read-only
	// Signal: the CIE has the "S" augmentation, so this is a signal
	// trampoline (glibc's __restore_rt) and the caller's PC is exact.
	Signal bool
	// RAMangled: DW_CFA_AARCH64_negate_ra_state toggled an odd number of
	// times: the saved x30 carries a pointer-authentication code.
	RAMangled bool
}

// Reg returns the rule of register n (RuleUnspecified if none).
func (r *Row) Reg(n uint16) Rule {
	for _, rr := range r.Regs {
		if rr.Reg == n {
			return rr.Rule
		}
	}
	return Rule{}
}

var (
	// ErrNoFDE: no FDE covers the address.
	ErrNoFDE = errors.New("no FDE covers the address")
	// ErrUnsupported: a target this package does not decode (32-bit, or
	// a machine other than x86-64 and aarch64, little-endian, and s390x,
	// big-endian).
	ErrUnsupported = errors.New("unsupported CFI target")
	// ErrFormat: the section or a CFA program is malformed.
	ErrFormat = errors.New("malformed CFI")
)

// FormatError says what is wrong where: the section, the byte offset in
// it, and the reason.
type FormatError struct {
	Section string
	Offset  int64 // byte offset in the section, -1 when unknown
	Msg     string
}

func (e *FormatError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("cfi: %s: %s", e.Section, e.Msg)
	}
	return fmt.Sprintf("cfi: %s at %#x: %s", e.Section, e.Offset, e.Msg)
}

func (e *FormatError) Unwrap() error { return ErrFormat }
