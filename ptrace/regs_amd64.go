//go:build linux && amd64

package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"stacktop/regs"
)

// prstatus is the NT_PRSTATUS layout of this architecture (user_regs_struct).
type prstatus = unix.PtraceRegs

const prstatusSize = int(unsafe.Sizeof(prstatus{}))

// convertRegs fills s from an x86-64 user_regs_struct, in DWARF numbering:
// 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip;
// fs_base, the thread pointer, goes to s.TLS.
func convertRegs(r *prstatus, s *regs.Set) {
	*s = regs.Set{Arch: regs.AMD64, PC: r.Rip}
	s.R = [regs.NumDWARF]uint64{
		0: r.Rax, 1: r.Rdx, 2: r.Rcx, 3: r.Rbx, 4: r.Rsi, 5: r.Rdi, 6: r.Rbp, 7: r.Rsp,
		8: r.R8, 9: r.R9, 10: r.R10, 11: r.R11, 12: r.R12, 13: r.R13, 14: r.R14, 15: r.R15,
		16: r.Rip,
	}
	s.Valid = 1<<17 - 1
	s.TLS = r.Fs_base
}
