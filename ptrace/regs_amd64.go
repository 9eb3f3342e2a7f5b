//go:build linux && amd64

package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/regs"
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
// code into a restart), or caught a call that waits (nanosleep, a futex
// wait, epoll_wait with a timeout...) on its way out: the thread was found
// runnable only because it was waking up. atExit: any other call, on its
// way out; the thread was running.
func syscallStop(r *prstatus) (asleep, atExit bool) {
	nr := int64(r.Orig_rax)
	if nr < 0 {
		return false, false
	}
	if isSleepReturn(int64(r.Rax), true) || amd64Waits(nr, r) {
		return true, false
	}
	return false, true
}

// amd64Waits reports whether x86-64 system call nr, with the arguments in
// r (the kernel keeps every register but rax, rcx and r11 across a call),
// waits: its CPU time is the kernel's wake-up path. A futex wake, a poll
// or epoll_wait with a zero timeout and a wait4 or waitid with WNOHANG do
// not wait: a busy event loop makes them all the time. A timeout behind a
// pointer (ppoll, pselect6, select, epoll_pwait2, rt_sigtimedwait) is not
// read: those count as waits.
func amd64Waits(nr int64, r *prstatus) bool {
	const (
		futexCmdMask = 0x7f // FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME cleared
		wnohang      = 1
	)
	switch nr {
	case 34, // pause
		35,  // nanosleep
		128, // rt_sigtimedwait
		130, // rt_sigsuspend
		230, // clock_nanosleep
		23,  // select
		270, // pselect6
		271, // ppoll
		441, // epoll_pwait2
		449: // futex_waitv
		return true
	case 202: // futex
		switch r.Rsi & futexCmdMask {
		case 0, // FUTEX_WAIT
			6,  // FUTEX_LOCK_PI
			9,  // FUTEX_WAIT_BITSET
			11, // FUTEX_WAIT_REQUEUE_PI
			13: // FUTEX_LOCK_PI2
			return true
		}
		return false
	case 7: // poll(fds, n, timeout ms)
		return int32(r.Rdx) != 0
	case 232, 281: // epoll_wait, epoll_pwait (epfd, events, n, timeout ms)
		return int32(r.R10) != 0
	case 61: // wait4(pid, status, options, rusage)
		return r.Rdx&wnohang == 0
	case 247: // waitid(which, id, info, options)
		return r.R10&wnohang == 0
	}
	return false
}
