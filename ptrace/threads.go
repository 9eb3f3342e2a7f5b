//go:build linux

package ptrace

// Thread bookkeeping: which threads a Process traces, has seen and has
// released, what a sample of an untraced thread is told (notTraced), and
// whether a thread's exit took the process with it (gone, dying).

import (
	"fmt"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// notTraced is the error for a sample of tid, which p does not trace.
func (p *Process) notTraced(tid int) error {
	switch {
	case p.released[tid]:
		return fmt.Errorf("thread %d released: %w", tid, ErrDetached)
	case p.seen[tid], tid == p.pid && p.leaderZombie:
		// The leader exited: a zombie until the others go.
		return ErrThreadExited
	}
	return ErrUnknownThread
}

// tracedByUs reports whether tid is a live thread of p traced by this
// tracer thread.
func (p *Process) tracedByUs(tid int) bool {
	st, err := procmaps.ReadStatus(p.pid, tid)
	return err == nil && st.Tgid == p.pid && st.TracerPID == p.tr.tid
}

func (p *Process) addThread(tid int, st threadState) *thread {
	var th *thread
	if n := len(p.slab); n < cap(p.slab) {
		p.slab = p.slab[:n+1]
		th = &p.slab[n]
		*th = thread{tid: tid, proc: p, state: st}
	} else {
		th = &thread{tid: tid, proc: p, state: st}
	}
	p.threads[tid] = th
	delete(p.released, tid) // a reused TID
	p.tidList.Store(nil)
	if st == stateNewborn {
		p.clones++
	}
	p.seen[tid] = true
	p.tr.threads[tid] = th
	return th
}

func (p *Process) forget(th *thread) {
	delete(p.threads, th.tid)
	p.tidList.Store(nil)
	if p.tr.threads[th.tid] == th {
		delete(p.tr.threads, th.tid)
	}
}

// gone drops an exited thread and says whether the process went with it.
// (A lazy Process may trace no thread at all while its process lives: it
// asks /proc.)
func (p *Process) gone(th *thread) error {
	p.forget(th)
	if p.exited || (!p.lazy && len(p.threads) == 0 && len(p.released) == 0) || p.dying() {
		p.exited = true
		return ErrProcessExited
	}
	return ErrThreadExited
}

// dying reports whether no thread of the process is alive any more (all
// exiting or zombies, or /proc/PID gone): exit_group is under way.
//
// It is asked at every thread exit, so it first looks at the main thread
// alone (one small read): a group exit (exit_group, a fatal signal) always
// takes the main thread too, which then shows PF_EXITING or is a zombie.
// Only then are all threads checked, since an execve in another thread, or
// a main thread that called pthread_exit, look the same from there. With
// threads coming and going by the thousand, checking every thread at
// every exit would cost more than the sampling (O(threads) per exit).
func (p *Process) dying() bool {
	if !p.leaderZombie {
		st, err := procmaps.ReadStat(p.pid, 0)
		if err == nil && st.State != 'Z' && st.State != 'X' && st.Flags&pfExiting == 0 {
			return false
		}
	}
	return !p.anyLive()
}

const pfExiting = 0x4

func (p *Process) anyLive() bool {
	tids, err := procmaps.Threads(p.pid)
	if err != nil {
		return false
	}
	for _, tid := range tids {
		st, err := procmaps.ReadStat(p.pid, tid)
		if err != nil || st.State == 'Z' || st.State == 'X' || st.Flags&pfExiting != 0 {
			continue
		}
		// exit_group queues SIGKILL to each other thread before it exits.
		if s, err := procmaps.ReadStatus(p.pid, tid); err == nil && s.SigPnd&(1<<(unix.SIGKILL-1)) != 0 {
			continue
		}
		return true
	}
	return false
}
