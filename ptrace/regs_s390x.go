//go:build linux && s390x

package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/regs"
)

// prstatus is unix.PtraceRegs, whose head (psw, gprs, acrs, orig_gpr2) is
// the kernel's s390_regs, the NT_PRSTATUS regset. The floating-point and
// PER fields behind it are not part of that regset.
type prstatus = unix.PtraceRegs

var prstatusSize = int(unsafe.Offsetof(prstatus{}.Fp_regs))

// convertRegs fills s from s390_regs: gprs 0-15 are DWARF 0-15 and the
// PSW address is the PC.
func convertRegs(r *prstatus, s *regs.Set) {
	*s = regs.Set{Arch: regs.S390X, PC: r.Psw.Addr}
	copy(s.R[:16], r.Gprs[:])
	s.Valid = 1<<16 - 1
}

// syscallStop tells whether the stop interrupted a system call that was
// blocking: s390x takes the ptrace stop before it handles a restart, so r2
// still holds the restart code. s390_regs has no "in a system call" flag,
// so -EINTR, a value user code may hold in r2, is not taken as one, and
// a stop at another call's exit is not told from one in user code.
func syscallStop(r *prstatus) (asleep, atExit bool) {
	return isSleepReturn(int64(r.Gprs[2]), false), false
}
