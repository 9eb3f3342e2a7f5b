package cfi

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// Call frame instructions (DWARF 5 section 6.4.2). The three "primary"
// opcodes keep their operand in the low six bits.
const (
	cfaAdvanceLoc = 0x40
	cfaOffset     = 0x80
	cfaRestore    = 0xc0

	cfaNop                       = 0x00
	cfaSetLoc                    = 0x01
	cfaAdvanceLoc1               = 0x02
	cfaAdvanceLoc2               = 0x03
	cfaAdvanceLoc4               = 0x04
	cfaOffsetExtended            = 0x05
	cfaRestoreExtended           = 0x06
	cfaUndefined                 = 0x07
	cfaSameValue                 = 0x08
	cfaRegister                  = 0x09
	cfaRememberState             = 0x0a
	cfaRestoreState              = 0x0b
	cfaDefCFA                    = 0x0c
	cfaDefCFARegister            = 0x0d
	cfaDefCFAOffset              = 0x0e
	cfaDefCFAExpression          = 0x0f
	cfaExpression                = 0x10
	cfaOffsetExtendedSF          = 0x11
	cfaDefCFASF                  = 0x12
	cfaDefCFAOffsetSF            = 0x13
	cfaValOffset                 = 0x14
	cfaValOffsetSF               = 0x15
	cfaValExpression             = 0x16
	cfaAArch64NegateRAState      = 0x2d // DW_CFA_GNU_window_save on SPARC
	cfaGNUArgsSize               = 0x2e
	cfaGNUNegativeOffsetExtended = 0x2f
)

// maxRememberDepth bounds DW_CFA_remember_state nesting, so a hostile
// program cannot grow the state stack without limit.
const maxRememberDepth = 64

// state is the row being built while a CFA program runs.
type state struct {
	cfa     Rule
	regs    [MaxReg]Rule
	mangled bool
}

// program runs CIE initial instructions and FDE instructions. It is the
// package's own interpreter rather than delve's: delve's turns
// DW_CFA_restore into "undefined" where DWARF means the CIE's initial rule,
// panics on a truncated program, and only answers "the row at one PC",
// where a table wants every row once.
type program struct {
	machine  elf.Machine
	order    binary.ByteOrder // of the section: DW_CFA_advance_loc2/4 operands
	codeAlig uint64
	dataAlig int64
	raReg    uint64
	initial  *state // after the CIE's initial instructions; nil while running them
}

// run executes ins from loc; emit is called for each row [loc, next) before
// the location advances and once at the end with next = end.
func (p *program) run(ins []byte, st *state, loc, end uint64, emit func(start, end uint64, st *state)) error {
	r := reader{b: ins, be: p.order == binary.BigEndian}
	var saved []state
	advance := func(delta uint64) {
		next := loc + delta*p.codeAlig
		if next < loc || next > end {
			next = end
		}
		if next > loc && emit != nil {
			emit(loc, next, st)
		}
		loc = next
	}
	setReg := func(reg uint64, rule Rule) {
		if reg < MaxReg {
			st.regs[reg] = rule
		}
	}
	for !r.done() {
		at := r.off
		op := r.u8()
		switch op & 0xc0 {
		case cfaAdvanceLoc:
			advance(uint64(op & 0x3f))
			continue
		case cfaOffset:
			setReg(uint64(op&0x3f), Rule{Kind: RuleOffset, Offset: int64(r.uleb()) * p.dataAlig})
			continue
		case cfaRestore:
			p.restore(st, uint64(op&0x3f))
			continue
		}
		switch op {
		case cfaNop:
		case cfaAdvanceLoc1:
			advance(r.uint(1))
		case cfaAdvanceLoc2:
			advance(r.uint(2))
		case cfaAdvanceLoc4:
			advance(r.uint(4))
		case cfaOffsetExtended:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleOffset, Offset: int64(r.uleb()) * p.dataAlig})
		case cfaOffsetExtendedSF:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleOffset, Offset: r.sleb() * p.dataAlig})
		case cfaGNUNegativeOffsetExtended:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleOffset, Offset: -int64(r.uleb()) * p.dataAlig})
		case cfaValOffset:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleValOffset, Offset: int64(r.uleb()) * p.dataAlig})
		case cfaValOffsetSF:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleValOffset, Offset: r.sleb() * p.dataAlig})
		case cfaRestoreExtended:
			p.restore(st, r.uleb())
		case cfaUndefined:
			setReg(r.uleb(), Rule{Kind: RuleUndefined})
		case cfaSameValue:
			setReg(r.uleb(), Rule{Kind: RuleSameValue})
		case cfaRegister:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleRegister, Reg: uint16(min(r.uleb(), 0xffff))})
		case cfaRememberState:
			if len(saved) >= maxRememberDepth {
				return fmt.Errorf("DW_CFA_remember_state nested deeper than %d at byte %d", maxRememberDepth, at)
			}
			saved = append(saved, *st)
		case cfaRestoreState:
			if len(saved) == 0 {
				return fmt.Errorf("DW_CFA_restore_state without remember_state at byte %d", at)
			}
			// The CFA is part of the remembered state too (as GCC and
			// libgcc agree), and so is the RA-signing state.
			*st = saved[len(saved)-1]
			saved = saved[:len(saved)-1]
		case cfaDefCFA:
			reg := r.uleb()
			st.cfa = Rule{Kind: RuleCFA, Reg: uint16(min(reg, 0xffff)), Offset: int64(r.uleb())}
		case cfaDefCFASF:
			reg := r.uleb()
			st.cfa = Rule{Kind: RuleCFA, Reg: uint16(min(reg, 0xffff)), Offset: r.sleb() * p.dataAlig}
		case cfaDefCFARegister:
			reg := r.uleb()
			if st.cfa.Kind != RuleCFA {
				st.cfa = Rule{Kind: RuleCFA}
			}
			st.cfa.Reg = uint16(min(reg, 0xffff))
		case cfaDefCFAOffset:
			off := int64(r.uleb())
			if st.cfa.Kind != RuleCFA {
				return fmt.Errorf("DW_CFA_def_cfa_offset without a register CFA at byte %d", at)
			}
			st.cfa.Offset = off
		case cfaDefCFAOffsetSF:
			off := r.sleb() * p.dataAlig
			if st.cfa.Kind != RuleCFA {
				return fmt.Errorf("DW_CFA_def_cfa_offset_sf without a register CFA at byte %d", at)
			}
			st.cfa.Offset = off
		case cfaDefCFAExpression:
			st.cfa = Rule{Kind: RuleCFAExpression, Expr: r.block()}
		case cfaExpression:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleExpression, Expr: r.block()})
		case cfaValExpression:
			reg := r.uleb()
			setReg(reg, Rule{Kind: RuleValExpression, Expr: r.block()})
		case cfaGNUArgsSize:
			r.uleb()
		case cfaAArch64NegateRAState:
			if p.machine != elf.EM_AARCH64 {
				return fmt.Errorf("opcode %#x is aarch64-only, at byte %d", op, at)
			}
			st.mangled = !st.mangled
		case cfaSetLoc:
			// Never emitted by GCC or LLVM for .eh_frame; its operand uses
			// the CIE's pointer encoding, which delve keeps private.
			return fmt.Errorf("DW_CFA_set_loc not supported, at byte %d", at)
		default:
			return fmt.Errorf("unknown opcode %#x at byte %d", op, at)
		}
	}
	if r.err != nil {
		return r.err
	}
	if emit != nil && loc < end {
		emit(loc, end, st)
	}
	return nil
}

// restore implements DW_CFA_restore: the register gets the rule the CIE's
// initial instructions gave it (unspecified when they gave none).
func (p *program) restore(st *state, reg uint64) {
	if reg >= MaxReg {
		return
	}
	if p.initial == nil {
		st.regs[reg] = Rule{} // inside the CIE itself: back to the default
		return
	}
	st.regs[reg] = p.initial.regs[reg]
}
