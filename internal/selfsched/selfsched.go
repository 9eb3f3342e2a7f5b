// Package selfsched holds how stacktop schedules its own threads while it
// dumps: a program-wide policy, so it lives in one place and the commands
// apply it (record and top have theirs in internal/session).
//
// A dump's work is serial where it matters: the tracer thread stops,
// reads and lets go of one thread after another, and the caller walks
// the samples as they come. On a machine whose CPUs the target keeps busy
// (4 spinning threads on 2 CPUs, bench/dump-1000.sh) every stacktop
// thread waited for the target's: traced with the kernel's sched_switch
// events, a 1,000-thread dump spent 75 ms of its 200 ms with the tracer
// runnable but not running, and the walks and /proc reads ran at a third
// of a CPU. The tracer's own priority is ptrace's business (see its
// Real-time windows); the rest run at nice -10, and Go has a spare P, so
// that a goroutine the runtime took off its thread (the tracer's,
// preempted by a garbage collection) finds a P at once instead of
// waiting for a walk to yield.
//
// Package early applies that policy as the program starts, before the
// command is known (it must come before the packages initialise, and
// GOMAXPROCS is cheap only then); Settle, first thing in main, takes it
// back for every other command.
package selfsched

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/selfsched/early"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// Settle ends the raise of package early for every command but dump: it
// gives each thread of the program the nice value the program started
// with (early raised the threads of the time, and those started since
// inherited it), and Go its default number of Ps. Call it first thing
// in main.
func Settle(dump bool) {
	if dump {
		return
	}
	if early.ProcsSet() {
		// Not GOMAXPROCS(prev): any call to it stops the runtime from
		// following later changes of the CPU affinity or cgroup limit.
		runtime.SetDefaultGOMAXPROCS()
	}
	prev, ok := early.Raised()
	if !ok {
		return
	}
	if tids, err := procmaps.Threads(os.Getpid()); err == nil {
		for _, tid := range tids {
			unix.Setpriority(unix.PRIO_PROCESS, tid, prev) // lowering needs no permission
		}
	}
}
