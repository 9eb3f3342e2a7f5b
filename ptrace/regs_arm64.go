//go:build linux && arm64

package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/regs"
)

// prstatus is the NT_PRSTATUS layout of this architecture (user_pt_regs).
type prstatus = unix.PtraceRegs

const prstatusSize = int(unsafe.Sizeof(prstatus{}))

// convertRegs fills s from an arm64 user_pt_regs: x0-x30 are DWARF 0-30,
// sp is 31; pc has no DWARF number and goes to s.PC.
func convertRegs(r *prstatus, s *regs.Set) {
	*s = regs.Set{Arch: regs.ARM64, PC: r.Pc}
	copy(s.R[:31], r.Regs[:])
	s.R[regs.ARM64SP] = r.Sp
	s.Valid = 1<<32 - 1
}

// syscallStop tells nothing on arm64: its kernel prepares the restart (x0
// back to orig_x0, the PC back onto the svc) before the ptrace stop, so
// the registers no longer say that a call was interrupted.
func syscallStop(r *prstatus) (asleep, atExit bool) { return false, false }
