package perfevent

import (
	"fmt"

	"codeberg.org/stacktop/stacktop/regs"
)

// A RegsLayout maps the kernel's perf_regs numbering of one architecture
// (the bit positions of perf_event_attr.sample_regs_user, as in the
// kernel's arch/*/include/uapi/asm/perf_regs.h) to regs.Set, which is in
// DWARF numbering.
//
// The kernel writes the requested registers in ascending perf_regs order,
// one u64 each, so the i-th value of a sample belongs to the i-th set bit
// of Mask.
type RegsLayout struct {
	Arch regs.Arch
	// Mask is the sample_regs_user value to ask for.
	Mask uint64
	// DWARF[i] is the DWARF number of perf register i, or -1 for a
	// register regs.Set has no slot for (flags, segment selectors, PSW
	// mask).
	DWARF [64]int8
	// PC is the perf number of the program counter.
	PC int
}

// NumRegs is the number of u64 values a sample carries for the layout.
func (l *RegsLayout) NumRegs() int {
	n := 0
	for m := l.Mask; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// Fill stores the register values of one sample (vals[i] is the i-th set
// bit of l.Mask) into s, in DWARF numbering. It fails when vals is not
// exactly as long as the mask asks.
func (l *RegsLayout) Fill(vals []uint64, s *regs.Set) error {
	if len(vals) != l.NumRegs() {
		return fmt.Errorf("perfevent: %d user registers, want %d for %v", len(vals), l.NumRegs(), l.Arch)
	}
	*s = regs.Set{Arch: l.Arch}
	i := 0
	for bit := 0; bit < 64; bit++ {
		if l.Mask&(1<<uint(bit)) == 0 {
			continue
		}
		v := vals[i]
		i++
		if bit == l.PC {
			s.PC = v
		}
		if d := l.DWARF[bit]; d >= 0 {
			s.Put(int(d), v)
		}
	}
	return nil
}

func newLayout(arch regs.Arch, pc int, dwarf map[int]int, extra ...int) RegsLayout {
	l := RegsLayout{Arch: arch, PC: pc}
	for i := range l.DWARF {
		l.DWARF[i] = -1
	}
	for perf, d := range dwarf {
		l.DWARF[perf] = int8(d)
		l.Mask |= 1 << uint(perf)
	}
	l.Mask |= 1 << uint(pc)
	for _, perf := range extra {
		l.Mask |= 1 << uint(perf)
	}
	return l
}

// x86-64 perf_regs: AX 0, BX 1, CX 2, DX 3, SI 4, DI 5, BP 6, SP 7, IP 8,
// FLAGS 9, CS 10, SS 11, DS..GS 12-15 (refused for 64-bit tasks), R8-R15
// 16-23. DWARF: rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6, rsp 7,
// r8-r15 8-15, return address (rip) 16, as ptrace fills regs.Set.
var layoutAMD64 = newLayout(regs.AMD64, 8, map[int]int{
	0: 0, 3: 1, 2: 2, 1: 3, 4: 4, 5: 5, 6: 6, 7: 7,
	16: 8, 17: 9, 18: 10, 19: 11, 20: 12, 21: 13, 22: 14, 23: 15,
	8: 16,
})

// arm64 perf_regs: X0-X28 0-28, X29 (fp) 29, LR 30, SP 31, PC 32; DWARF
// numbers x0-x30 0-30 and sp 31 are the same.
var layoutARM64 = func() RegsLayout {
	m := map[int]int{}
	for i := 0; i <= 31; i++ {
		m[i] = i
	}
	return newLayout(regs.ARM64, 32, m)
}()

// s390x perf_regs: R0-R15 0-15, FP0-FP15 16-31, MASK 32 (not asked for), PC 33. DWARF:
// r0-r15 0-15, and 16-31 hold the FPRs in the ABI's order f0,f2,f4,f6,
// f1,f3,f5,f7,f8,f10,f12,f14,f9,f11,f13,f15.
var layoutS390X = func() RegsLayout {
	m := map[int]int{}
	for i := 0; i < 16; i++ {
		m[i] = i
	}
	fprDwarf := [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}
	for d, f := range fprDwarf {
		m[16+f] = 16 + d
	}
	return newLayout(regs.S390X, 33, m)
}()

// Layout returns the register layout of arch, or false for an architecture
// the back end does not support.
func Layout(arch regs.Arch) (*RegsLayout, bool) {
	switch arch {
	case regs.AMD64:
		return &layoutAMD64, true
	case regs.ARM64:
		return &layoutARM64, true
	case regs.S390X:
		return &layoutS390X, true
	}
	return nil, false
}
