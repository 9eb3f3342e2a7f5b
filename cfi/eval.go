package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/go-delve/delve/pkg/dwarf/op"

	"codeberg.org/stacktop/stacktop/regs"
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
	if r.Arch == regs.S390X {
		// delve's stack machine reads operands little-endian.
		if prog, err = littleEndianOperands(prog); err != nil {
			return 0, err
		}
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

// littleEndianOperands returns a copy of a big-endian target's expression
// with its fixed-size operands (DW_OP_addr, DW_OP_const2u..8s,
// DW_OP_bra, DW_OP_skip) byte-swapped, so delve's little-endian stack
// machine reads the values the target meant. LEB128 operands need no
// change; an opcode it does not know is an error.
func littleEndianOperands(prog []byte) ([]byte, error) {
	out := append([]byte(nil), prog...)
	rd := reader{b: out}
	for !rd.done() {
		at := rd.off
		o := rd.u8()
		swap := 0
		switch {
		case o == 0x03 || o == 0x0e || o == 0x0f: // addr, const8u/s
			swap = 8
		case o == 0x0a || o == 0x0b || o == 0x28 || o == 0x2f: // const2u/s, bra, skip
			swap = 2
		case o == 0x0c || o == 0x0d: // const4u/s
			swap = 4
		case o == 0x08 || o == 0x09 || o == 0x15 || o == 0x94 || o == 0x95: // const1u/s, pick, deref_size, xderef_size
			rd.u8()
		case o == 0x10 || o == 0x23 || o == 0x90: // constu, plus_uconst, regx
			rd.uleb()
		case o == 0x11 || (o >= 0x70 && o <= 0x8f): // consts, breg0-31
			rd.sleb()
		case o == 0x92: // bregx
			rd.uleb()
			rd.sleb()
		case o == 0x06 || o == 0x12 || o == 0x13 || o == 0x14 || o == 0x16 || o == 0x17 ||
			(o >= 0x19 && o <= 0x27) || (o >= 0x29 && o <= 0x2e) || (o >= 0x30 && o <= 0x6f) || o == 0x96 || o == 0x9c:
			// no operand
		default:
			return nil, fmt.Errorf("%w: opcode %#x at byte %d", ErrExpr, o, at)
		}
		if swap > 0 {
			if len(out)-rd.off < swap {
				return nil, fmt.Errorf("%w: truncated operand at byte %d", ErrExpr, at)
			}
			slices.Reverse(out[rd.off : rd.off+swap])
			rd.off += swap
		}
		if rd.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrExpr, rd.err)
		}
	}
	return out, nil
}
