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

// syscallStop tells where in a system call the stop found the thread.
// orig_rax holds the number of the call the thread is in (-1 outside one).
// Asleep: the stop interrupted a call that was blocking, whose code for
// that is in rax (at a ptrace stop the kernel has not yet turned a restart
// code into a restart), or caught a call that only waits (nanosleep,
// futex, epoll_wait...) on its way out: the thread was found runnable only
// because it was waking up. atExit: any other call, on its way out.
func syscallStop(r *prstatus) (asleep, atExit bool) {
	nr := int64(r.Orig_rax)
	if nr < 0 {
		return false, false
	}
	if isSleepReturn(int64(r.Rax), true) || amd64WaitOnly(nr) {
		return true, false
	}
	return false, true
}

// amd64WaitOnly reports whether x86-64 system call nr does nothing but
// wait: its CPU time is the kernel's wake-up path.
func amd64WaitOnly(nr int64) bool {
	switch nr {
	case 7, // poll
		23,  // select
		34,  // pause
		35,  // nanosleep
		61,  // wait4
		128, // rt_sigtimedwait
		130, // rt_sigsuspend
		202, // futex
		230, // clock_nanosleep
		232, // epoll_wait
		247, // waitid
		270, // pselect6
		271, // ppoll
		281, // epoll_pwait
		441, // epoll_pwait2
		449: // futex_waitv
		return true
	}
	return false
}
