package ptrace

// The codes a blocking system call returns when a stop or a signal
// interrupts it (include/linux/errno.h; the ERESTART* ones never reach
// user space: the kernel restarts the call after the stop).
const (
	errnoEINTR          = 4
	errnoERESTARTSYS    = 512
	errnoERESTARTNOINTR = 513
	errnoERESTARTNOHAND = 514
	errnoERESTARTBLOCK  = 516 // ERESTART_RESTARTBLOCK: nanosleep, poll with a timeout, futex with a timeout
)

// isSleepReturn reports whether ret, a system call's return value, is the
// code of a call interrupted while it slept; withEINTR counts -EINTR too
// (epoll_wait and others return it instead of restarting).
func isSleepReturn(ret int64, withEINTR bool) bool {
	switch -ret {
	case errnoERESTARTSYS, errnoERESTARTNOINTR, errnoERESTARTNOHAND, errnoERESTARTBLOCK:
		return true
	case errnoEINTR:
		return withEINTR
	}
	return false
}
