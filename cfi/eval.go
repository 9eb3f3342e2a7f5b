package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/op"

	"stacktop/regs"
)

// ErrExpr: a DWARF expression could not be evaluated.
var ErrExpr = errors.New("cannot evaluate DWARF expression")

// ReadWord reads one little-endian target word (process memory, a stack
// snapshot).
type ReadWord func(addr uint64) (uint64, error)

// Eval evaluates the expression of a rule with delve's DWARF stack machine:
// for RuleExpression and RuleValExpression the CFA is pushed first (as
// DWARF says), for RuleCFAExpression nothing is. Registers come from r
// (only its valid ones); memory through read. It never panics: a malformed
// expression is an error wrapping ErrExpr.
func Eval(rule Rule, r *regs.Set, cfa uint64, read ReadWord) (v uint64, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = 0, fmt.Errorf("%w: %v", ErrExpr, p)
		}
	}()
	prog := rule.Expr
	switch rule.Kind {
	case RuleExpression, RuleValExpression:
		// DW_OP_call_frame_cfa pushes DwarfRegisters.CFA.
		prog = append([]byte{byte(op.DW_OP_call_frame_cfa)}, rule.Expr...)
	case RuleCFAExpression:
	default:
		return 0, fmt.Errorf("%w: rule %v has no expression", ErrExpr, rule.Kind)
	}
	regsList := make([]*op.DwarfRegister, regs.NumDWARF)
	for n := 0; n < regs.NumDWARF; n++ {
		if v, ok := r.Get(n); ok {
			regsList[n] = &op.DwarfRegister{Uint64Val: v}
		}
	}
	sp, fp, lr := r.Arch.SPReg(), r.Arch.FPReg(), r.Arch.RAReg()
	if lr < 0 {
		lr = 16 // amd64's RA column
	}
	dr := op.NewDwarfRegisters(0, regsList, binary.LittleEndian, 16, uint64(sp), uint64(fp), uint64(lr))
	dr.CFA = int64(cfa)
	mem := func(buf []byte, addr uint64) (int, error) {
		if len(buf) != 8 {
			return 0, fmt.Errorf("%d-byte read", len(buf))
		}
		w, err := read(addr)
		if err != nil {
			return 0, err
		}
		binary.LittleEndian.PutUint64(buf, w)
		return 8, nil
	}
	res, pieces, err := op.ExecuteStackProgram(*dr, prog, 8, mem)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrExpr, err)
	}
	if pieces != nil {
		return 0, fmt.Errorf("%w: composite location", ErrExpr)
	}
	return uint64(res), nil
}
