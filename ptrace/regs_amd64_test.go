//go:build linux && amd64

package ptrace

import "testing"

// syscallStop tells a call that waits from one that does not by its
// number and, where the registers hold them, its arguments.
func TestSyscallStopAMD64(t *testing.T) {
	const (
		eintr         = -4
		erestartsys   = -512
		erestartblock = -516
	)
	const (
		futexWaitPrivate = 0x80 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
		futexWakePrivate = 0x81 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
	)
	neg := func(v int64) uint64 { return uint64(v) }
	for _, c := range []struct {
		name           string
		r              prstatus
		asleep, atExit bool
	}{
		{"user code", prstatus{Orig_rax: neg(-1), Rax: 5}, false, false},
		{"nanosleep interrupted", prstatus{Orig_rax: 35, Rax: neg(erestartblock)}, true, false},
		{"read interrupted", prstatus{Orig_rax: 0, Rax: neg(erestartsys)}, true, false},
		{"epoll_wait EINTR", prstatus{Orig_rax: 232, Rax: neg(eintr), R10: 100}, true, false},
		{"nanosleep returned", prstatus{Orig_rax: 35}, true, false},
		{"futex wait returned", prstatus{Orig_rax: 202, Rsi: futexWaitPrivate}, true, false},
		{"futex wake", prstatus{Orig_rax: 202, Rsi: futexWakePrivate, Rax: 1}, false, true},
		{"epoll_wait with a timeout", prstatus{Orig_rax: 232, R10: neg(-1), Rax: 1}, true, false},
		{"epoll_wait polling", prstatus{Orig_rax: 232, R10: 0, Rax: 3}, false, true},
		{"poll polling", prstatus{Orig_rax: 7, Rdx: 0}, false, true},
		{"wait4 WNOHANG", prstatus{Orig_rax: 61, Rdx: 1}, false, true},
		{"wait4", prstatus{Orig_rax: 61, Rdx: 0}, true, false},
		{"write", prstatus{Orig_rax: 1, Rax: 4096}, false, true},
		{"clock_gettime", prstatus{Orig_rax: 228}, false, true},
	} {
		asleep, atExit := syscallStop(&c.r)
		if asleep != c.asleep || atExit != c.atExit {
			t.Errorf("%s: asleep %v, at exit %v; want %v, %v", c.name, asleep, atExit, c.asleep, c.atExit)
		}
	}
}
