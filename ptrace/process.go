//go:build linux

package ptrace

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/stacktop/stacktop/regs"
)

// threadState is what the tracer knows about one tracee thread; it decides
// which request resumes it and whether a stop can be waited for.
type threadState uint8

const (
	stateRunning   threadState = iota // resumed with PTRACE_CONT (or just seized)
	stateListening                    // in group-stop, resumed with PTRACE_LISTEN
	stateHeld                         // in a ptrace-stop we consumed: we owe it a resume
	stateNewborn                      // auto-attached by TRACECLONE; first stop not yet seen
)

type thread struct {
	tid       int
	proc      *Process
	state     threadState
	groupStop bool // the held stop is a group-stop: resume with LISTEN, not CONT
	sig       int  // signal to deliver when resumed (from a signal-delivery-stop)
	// blocked: interrupted, but in an uninterruptible sleep for longer
	// than blockedGrace. Its stop comes when the sleep ends; until then
	// nothing waits for it (see waitUninterruptible).
	blocked bool
	// inFlight: a batch interrupted it and waits for its stop (see
	// runBatch); any stop is held for the batch.
	inFlight bool
}

// Process is an attached process. All its methods run on the tracer thread
// and are safe for concurrent use.
type Process struct {
	tr  *Tracer
	pid int

	// Owned by the tracer goroutine.
	threads map[int]*thread
	seen    map[int]bool // every TID ever traced, to tell "exited" from "unknown"
	// released holds the threads a Release batch detached at their
	// sample: alive, as far as we know, but no longer ours.
	released     map[int]bool
	wasStopped   bool
	leaderZombie bool // main thread exited (pthread_exit) while others run
	frozen       bool
	exited       bool
	detached     bool
	detachErr    error        // the first Detach's error, which later calls return
	execs        atomic.Int64 // written on the tracer thread, read anywhere
	// tidList caches Threads' answer; the tracer thread clears it when a
	// thread is added or forgotten.
	tidList atomic.Pointer[[]int]
	// clones counts the threads the kernel attached to us (TRACECLONE):
	// without any, Detach has no stray thread to look for.
	clones int

	// lazy: attached by AttachLazy; a batch seizes each thread it samples
	// (seizeLazy). listed holds every TID /proc listed for the process
	// (at the attach, and by ListThreads): only those may be seized, so a
	// batch never seizes a thread of another process. listMu guards
	// listed, which ListThreads fills from the caller's goroutine.
	lazy   bool
	listMu sync.Mutex
	listed map[int]bool
	slab   []thread // records for the threads a lazy batch seizes (addThread)

	// batchMu is held by SampleBatch for its whole run: a window's
	// samples wait in their slots (spare) for the caller while the next
	// window fills batch.
	batchMu sync.Mutex
	batch   batchSlots
	spare   batchSlots // the last window's, which the caller reads meanwhile
	// flights are the threads a batch interrupted and waits for; with
	// Overlap they outlive a window (runWindow), so they are the
	// Process's, not a slot set's.
	flights []flight
}

// Sample is one thread's registers and the stack bytes above its stack
// pointer, taken while the thread was stopped.
type Sample struct {
	TID       int
	Regs      regs.Set
	StackAddr uint64        // address of Stack[0]: the stack pointer
	Stack     []byte        // [StackAddr, StackAddr+len(Stack)); short if the read hit unmapped memory
	StackErr  error         // why Stack is shorter than asked, if it is
	Stopped   time.Duration // stop reported by wait -> resume request returned
	Total     time.Duration // PTRACE_INTERRUPT issued -> resume request returned
	// Asleep reports that the stop found the thread waiting in the
	// kernel: it interrupted a blocking system call (the registers hold
	// the call's restart code), or caught a call that only waits on its
	// way out. The thread was not on a CPU when it was asked to stop.
	// Known on amd64 and s390x (restart codes only); false elsewhere.
	Asleep bool
	// AtSyscallExit reports that the stop caught the thread on its way
	// out of another system call: it was in the kernel when asked to
	// stop, or entered it before the stop could land. amd64 only.
	AtSyscallExit bool
}

// PID returns the process ID.
func (p *Process) PID() int { return p.pid }

// WasStopped reports whether the process was in group-stop (state T) when
// it was attached. Such a process is never resumed by this package.
func (p *Process) WasStopped() bool { return p.wasStopped }

// JobStopped reports whether thread tid is in a job-control stop (SIGSTOP,
// SIGTSTP, ...), as far as the tracer knows: /proc shows such a thread as
// t (tracing stop) while it is traced, where the user expects T.
func (p *Process) JobStopped(tid int) bool {
	var stopped bool
	p.tr.do(func() {
		th := p.threads[tid]
		switch {
		case th == nil:
		case th.state == stateListening, th.state == stateHeld && th.groupStop:
			stopped = true
		case th.state == stateRunning:
			// Seized while stopped: the kernel's group-stop report may not
			// have been collected yet.
			stopped = p.wasStopped
		}
	})
	return stopped
}

// Threads returns the TIDs currently traced, sorted; nil once the process
// exited or was detached, or every thread was released
// (BatchOptions.Release). The slice is shared: callers must not modify it.
//
// The periodic engine asks at every tick, and the thread set rarely
// changes between ticks, so the list is kept until a thread comes or goes
// instead of being rebuilt (and sorted) on the tracer thread each time.
// Until then Threads returns that same slice, so a caller that kept the
// previous answer can tell "no change" by comparing &tids[0].
func (p *Process) Threads() []int {
	if tids := p.tidList.Load(); tids != nil {
		return *tids
	}
	var tids []int
	p.tr.do(func() {
		if len(p.threads) > 0 {
			tids = make([]int, 0, len(p.threads))
			for tid := range p.threads {
				tids = append(tids, tid)
			}
			slices.Sort(tids)
		}
		p.tidList.Store(&tids)
	})
	return tids
}

// Execs returns how many execve calls the process made while attached:
// when it changes, cached mappings and symbols are stale.
//
// It does not go through the tracer thread: the periodic engine asks at
// every tick.
func (p *Process) Execs() int { return int(p.execs.Load()) }

func (p *Process) usable() error {
	switch {
	case p.detached:
		return ErrDetached
	case p.exited:
		return ErrProcessExited
	}
	return nil
}
