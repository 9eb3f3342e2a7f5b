//go:build linux

package ptrace

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"

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

// Attach seizes every thread of pid (PTRACE_SEIZE with TRACECLONE and
// TRACEEXEC; no signal, no stop), listing /proc/PID/task until no new
// thread appears. A process that was stopped (state T) stays stopped.
// Failures are *AttachError.
func (t *Tracer) Attach(pid int) (*Process, error) { return t.attachMode(pid, false, nil) }

// AttachLazy is Attach for a one-shot dump: it seizes the main thread only
// (so a permission, ptrace_scope or container refusal is an *AttachError
// right here, as with Attach) and lists the threads of /proc/PID/task;
// each further thread is seized by the batch that samples it, right
// before its interrupt (see "Lazy seizing" in the package doc). A process
// that is stopped (state T), or whose main thread is a zombie, is
// attached as Attach does instead: Lazy then reports false.
func (t *Tracer) AttachLazy(pid int) (*Process, error) { return t.attachMode(pid, true, nil) }

// Listing is the thread list of /proc/PID/task as ListThreads read it at
// one moment. A lazy attach given one (AttachLazyListed) takes it for its
// own listing, so a caller that needs the list at the open too (a dump
// reads each thread's stat while the tracer attaches) lists once instead
// of twice; only ListThreads makes one, so the threads a batch may seize
// are still only ones /proc listed for the process.
type Listing struct {
	pid  int
	tids []int
}

// ListThreads lists the threads of pid from /proc/PID/task.
func ListThreads(pid int) (*Listing, error) {
	tids, err := procmaps.Threads(pid)
	if err != nil {
		return nil, fmt.Errorf("listing the threads of %d: %w", pid, err)
	}
	return &Listing{pid: pid, tids: tids}, nil
}

// PID is the process l lists.
func (l *Listing) PID() int { return l.pid }

// TIDs returns the threads listed, ascending. The slice is l's: read it,
// do not change it.
func (l *Listing) TIDs() []int { return l.tids }

// AttachLazyListed is AttachLazy(l.PID()) with l for the attach's listing
// of /proc/PID/task (the threads a batch may seize, until ListThreads
// lists again). A thread created after l was read is not listed: a later
// listing finds it, as one created after AttachLazy's own would be.
func (t *Tracer) AttachLazyListed(l *Listing) (*Process, error) {
	if l == nil {
		return nil, errors.New("ptrace: AttachLazyListed without a listing (ListThreads makes one)")
	}
	return t.attachMode(l.pid, true, l)
}

func (t *Tracer) attachMode(pid int, lazy bool, listing *Listing) (*Process, error) {
	if pid <= 0 {
		return nil, &AttachError{PID: pid, Cause: CauseNoProcess, Err: unix.ESRCH}
	}
	if pid == os.Getpid() {
		return nil, newAttachError(pid, 0, CauseSelf, nil)
	}
	st, err := procmaps.ReadStat(pid, 0)
	if err != nil {
		return nil, &AttachError{PID: pid, Cause: CauseNoProcess, Err: err}
	}
	if st.Flags&pfKthread != 0 {
		return nil, newAttachError(pid, 0, CauseKernelThread, nil)
	}
	if s, err := procmaps.ReadStatus(pid, 0); err == nil && s.Tgid == os.Getpid() {
		return nil, newAttachError(pid, 0, CauseSelf, nil)
	}
	var p *Process
	if e := t.do(func() { p, err = t.attach(pid, st, lazy, listing) }); e != nil {
		return nil, e
	}
	return p, err
}

func (t *Tracer) attach(pid int, st procmaps.Stat, lazy bool, listing *Listing) (*Process, error) {
	p := &Process{tr: t, pid: pid, threads: make(map[int]*thread), seen: make(map[int]bool),
		released: make(map[int]bool), wasStopped: st.State == 'T'}
	if st.State == 'Z' || st.State == 'X' {
		// A zombie leader with live threads is a process whose main thread
		// called pthread_exit: sample the rest.
		if !p.anyLive() {
			return nil, newAttachError(pid, 0, CauseZombie, nil)
		}
		p.leaderZombie = true
	}
	// A stopped process must stay stopped: each thread's group-stop report
	// is taken at its seize, before anything could wake it. A zombie main
	// thread proves no credentials. Both are attached whole.
	p.lazy = lazy && !p.wasStopped && !p.leaderZombie
	t.procs[pid] = p
	fail := func(err error) (*Process, error) {
		p.detach()
		return nil, err
	}
	tried := make(map[int]bool)
	for {
		var tids []int
		var err error
		if listing != nil {
			// The caller's listing stands for the first; reordered
			// below, so a copy.
			tids, listing = slices.Clone(listing.tids), nil
		} else {
			tids, err = procmaps.Threads(pid)
		}
		if err != nil {
			if len(p.threads) == 0 {
				return fail(&AttachError{PID: pid, Cause: CauseNoProcess, Err: err})
			}
			break
		}
		// The main thread goes first: once it is seized, an EPERM from
		// another thread can only mean that thread is leaving (below).
		// TIDs wrap around, so ascending order does not put it first.
		if i := slices.Index(tids, pid); i > 0 {
			copy(tids[1:i+1], tids[:i])
			tids[0] = pid
		}
		if p.lazy {
			// What a batch adds to for each thread it seizes and
			// releases, sized (and the threads' records allocated) here,
			// not while threads wait in their stops for the tracer.
			n := 2 * len(tids)
			p.listed, p.seen, p.released = make(map[int]bool, n), make(map[int]bool, n), make(map[int]bool, n)
			p.slab = make([]thread, 0, len(tids))
		}
		added := false
		for _, tid := range tids {
			if p.lazy {
				// Lazy: the others are seized by the batch that samples them.
				p.listed[tid] = true
				if tid != pid {
					continue
				}
			}
			if tried[tid] {
				continue
			}
			tried[tid], added = true, true
			if t.threads[tid] != nil { // auto-attached by TRACECLONE already
				continue
			}
			switch err := seize(tid, p.seizeOptions()); err {
			case nil:
				if !p.ours(tid) {
					continue // the TID is another process's now
				}
				th := p.addThread(tid, stateRunning)
				// Seizing a stopped task makes the kernel queue a group-stop
				// report (PTRACE_EVENT_STOP) before SEIZE returns: handle it
				// now so the thread goes to LISTEN and stays stopped.
				if wpid, ws, err := wait4(tid, unix.WNOHANG); err == nil && wpid == tid {
					p.onStatus(th, ws, false)
				}
			case unix.ESRCH:
				// Gone between listing and seizing. Skip it unless it was the
				// main thread, which means the whole process is gone.
				if tid == pid && !p.leaderZombie {
					return fail(&AttachError{PID: pid, TID: tid, Cause: CauseNoProcess, Err: err})
				}
			case unix.EPERM:
				s, _ := procmaps.ReadStatus(pid, tid)
				if s.TracerPID == t.tid { // ours, by TRACECLONE
					p.addThread(tid, stateNewborn)
					continue
				}
				if tid == pid && p.leaderZombie {
					continue
				}
				if ts, err := procmaps.ReadStat(pid, tid); err == nil && (ts.State == 'Z' || ts.State == 'X') {
					if tid == pid && len(p.threads) == 0 {
						return fail(newAttachError(pid, tid, CauseZombie, nil))
					}
					continue // a thread on its way out
				}
				if tid != pid && p.threads[pid] != nil {
					// The main thread was seized, so our credentials are
					// good: the kernel refuses a thread that is exiting and
					// not yet a zombie. Give it a moment to finish leaving.
					if attached, gone := p.seizeLeaving(tid); attached || gone {
						continue
					}
				}
				cause := CausePermission
				if s.TracerPID != 0 {
					cause = CauseAlreadyTraced
				}
				return fail(newAttachError(pid, tid, cause, err))
			default:
				return fail(newAttachError(pid, tid, CauseOther, fmt.Errorf("PTRACE_SEIZE: %w", err)))
			}
		}
		if !added || p.lazy {
			break
		}
	}
	if len(p.threads) == 0 {
		return fail(&AttachError{PID: pid, Cause: CauseNoProcess, Err: unix.ESRCH})
	}
	return p, nil
}

// ours reports whether tid, just seized, is a thread of p. A TID listed in
// /proc/PID/task can exit and be taken by a thread of another process
// before the seize, which then attaches that thread: it is let go at once
// (interrupted; the tracer detaches it at that stop, as any tracee no
// Process claims, with its signal) and never sampled as p's.
func (p *Process) ours(tid int) bool {
	if procmaps.IsThreadOf(p.pid, tid) {
		return true
	}
	if ptraceReq(unix.PTRACE_INTERRUPT, tid, 0, 0) == nil {
		p.tr.leftTraced[tid] = struct{}{} // its stop comes, and is let go
	}
	return false
}

// seizeLeaving retries PTRACE_SEIZE of a thread that refused with EPERM
// while exiting, for up to about 10 ms: it either attaches (the refusal
// was something else that passed) or the thread is gone or a zombie.
func (p *Process) seizeLeaving(tid int) (attached, gone bool) {
	for i := 0; i < 50; i++ {
		time.Sleep(200 * time.Microsecond)
		switch seize(tid, p.seizeOptions()) {
		case nil:
			if !p.ours(tid) {
				return false, true
			}
			p.addThread(tid, stateRunning)
			return true, false
		case unix.ESRCH:
			return false, true
		}
		if ts, err := procmaps.ReadStat(p.pid, tid); err != nil || ts.State == 'Z' || ts.State == 'X' {
			return false, true
		}
	}
	return false, false
}

// seizeOptions are the PTRACE_O_* options p's threads are seized with.
func (p *Process) seizeOptions() uintptr {
	if p.lazy {
		return lazySeizeOptions
	}
	return seizeOptions
}

// Lazy reports whether p was attached lazily (AttachLazy): its threads
// are seized by the batches that sample them, and Threads lists only the
// ones traced now; ListThreads lists them all.
func (p *Process) Lazy() bool { return p.lazy }

// ListThreads lists the process's threads from /proc/PID/task, ascending,
// and lets a lazy Process's batches seize them (a TID never listed is
// ErrUnknownThread). It runs on the caller's goroutine.
func (p *Process) ListThreads() ([]int, error) {
	tids, err := procmaps.Threads(p.pid)
	if err != nil {
		return nil, fmt.Errorf("listing the threads of %d: %w", p.pid, err)
	}
	if p.lazy {
		p.listMu.Lock()
		for _, tid := range tids {
			p.listed[tid] = true
		}
		p.listMu.Unlock()
	}
	return tids, nil
}

// seizeLazy seizes thread tid of a lazy Process for a batch's sample,
// right before its interrupt. A thread gone since it was listed is
// ErrThreadExited (ErrProcessExited if the process went with it). An
// EPERM can no longer be a permission problem (the main thread was
// seized): a thread on its way out is reported exited at once, not
// retried for milliseconds as Attach does (seizeLeaving) while other
// threads wait in their stops; a thread another tracer holds gets a
// CauseAlreadyTraced *AttachError of its own.
func (p *Process) seizeLazy(tid int) (*thread, error) {
	p.listMu.Lock()
	listed := p.listed[tid]
	p.listMu.Unlock()
	if !listed {
		return nil, p.notTraced(tid)
	}
	for try := 0; ; try++ {
		switch err := seize(tid, lazySeizeOptions); err {
		case nil:
			p.tr.batch.seizes++
			if !p.ours(tid) {
				return nil, ErrThreadExited // and its TID another process's
			}
			return p.addThread(tid, stateRunning), nil
		case unix.ESRCH:
			return nil, p.vanished()
		case unix.EPERM:
			s, serr := procmaps.ReadStatus(p.pid, tid)
			switch {
			case serr != nil:
				return nil, p.vanished()
			case s.TracerPID == p.tr.tid:
				// Ours already: auto-attached (CLONE_PTRACE), its first
				// stop not collected yet.
				return p.addThread(tid, stateNewborn), nil
			case s.TracerPID != 0:
				return nil, newAttachError(p.pid, tid, CauseAlreadyTraced, err)
			}
			if ts, err := procmaps.ReadStat(p.pid, tid); err != nil || ts.State == 'Z' || ts.State == 'X' || ts.Flags&pfExiting != 0 {
				return nil, ErrThreadExited
			}
			if try > 0 {
				return nil, newAttachError(p.pid, tid, CausePermission, err)
			}
			// Refused, yet not seen exiting: the exit may have begun
			// between the two; once more.
		default:
			return nil, fmt.Errorf("thread %d: PTRACE_SEIZE: %w", tid, err)
		}
	}
}

// vanished is the error for a thread of a lazy Process that is gone
// before it could be seized: ErrProcessExited if the process is exiting,
// else ErrThreadExited.
func (p *Process) vanished() error {
	if p.dying() {
		p.exited = true
		return ErrProcessExited
	}
	return ErrThreadExited
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

// Sample stops thread tid (PTRACE_INTERRUPT), reads its registers and up
// to stackWindow bytes of stack from its stack pointer, and resumes it the
// way it was running (CONT, delivering a pending signal, or LISTEN for a
// group-stopped process). stackEnd, when above the stack pointer, bounds
// the read (the end of the stack mapping); 0 means no bound. While the
// process is frozen the thread is read without being stopped or resumed.
func (p *Process) Sample(tid int, stackWindow int, stackEnd uint64) (Sample, error) {
	var s Sample
	err := p.SampleInto(&s, tid, stackWindow, stackEnd)
	return s, err
}

// SampleInto is Sample reusing s: s.Stack's array is overwritten, so a
// caller that keeps stacks must copy them. It allocates nothing when
// cap(s.Stack) >= stackWindow.
func (p *Process) SampleInto(s *Sample, tid int, stackWindow int, stackEnd uint64) error {
	if prstatusSize == 0 {
		return ErrUnsupportedArch
	}
	var err error
	if e := p.tr.do(func() {
		p.tr.stopBatch(func() { err = p.sample(s, tid, stackWindow, stackEnd) }, nil)
	}); e != nil {
		return e
	}
	return err
}

func (p *Process) usable() error {
	switch {
	case p.detached:
		return ErrDetached
	case p.exited:
		return ErrProcessExited
	}
	return nil
}

func (p *Process) sample(s *Sample, tid int, window int, end uint64) error {
	if err := p.usable(); err != nil {
		return err
	}
	th := p.threads[tid]
	if th == nil || (tid == p.pid && p.leaderZombie) {
		return p.notTraced(tid)
	}
	if n := max(window, 0); cap(s.Stack) < n {
		// Allocate before the stop, not while the thread waits for us.
		s.Stack = make([]byte, n)
	}
	t0 := time.Now()
	if (th.state == stateRunning || th.state == stateListening) && !th.blocked {
		// ESRCH means the thread is gone: waitHeld then collects its exit.
		ptraceReq(unix.PTRACE_INTERRUPT, tid, 0, 0)
	}
	if th.state != stateHeld {
		if err := p.waitHeld(th); err != nil {
			return err
		}
	}
	t1 := time.Now()
	err := p.read(th, s, window, end, nil)
	if !p.frozen {
		p.resume(th)
	}
	t2 := time.Now()
	s.Stopped, s.Total = t2.Sub(t1), t2.Sub(t0)
	return err
}

// read fills s from the held thread th: one GETREGSET (two on s390x, for
// the FPRs), one process_vm_readv of window bytes above SP, or, in a
// batch b with a WindowAt, of what it says for this thread at this SP.
func (p *Process) read(th *thread, s *Sample, window int, end uint64, b *batchSlots) error {
	t := p.tr
	t.rawIov.Base = (*byte)(unsafe.Pointer(&t.raw))
	t.rawIov.SetLen(prstatusSize)
	if err := getRegset(th.tid, &t.rawIov); err != nil {
		if err == unix.ESRCH {
			// SIGKILL (exit_group, execve) wakes even a stopped tracee:
			// its exit will be reported.
			th.state = stateRunning
			if p.dying() {
				return ErrProcessExited
			}
			return ErrThreadExited
		}
		return fmt.Errorf("thread %d: PTRACE_GETREGSET: %w", th.tid, err)
	}
	convertRegs(&t.raw, &s.Regs)
	s.Asleep, s.AtSyscallExit = syscallStop(&t.raw)
	if fprsInDWARF {
		// s390x code saves callee-saved GPRs (r11 the frame pointer, r15)
		// in FPRs, and its SFrame rows say so: without them such a frame
		// 0 cannot be stepped. One more GETREGSET, on s390x only; a
		// failure leaves the FPRs unknown, as before.
		if raw, err := getRegsetInto(th.tid, ntPRFPREG, t.fpRaw[:]); err == nil {
			convertFPRegs(raw, &s.Regs)
		}
	}
	s.TID = th.tid
	sp := s.Regs.SP()
	s.StackAddr, s.StackErr = sp, nil
	if b != nil && b.windowAt != nil {
		window = min(b.windowAt(th.tid, &s.Regs), b.maxWindow)
	}
	n := max(window, 0)
	if end > sp && end-sp < uint64(n) {
		n = int(end - sp)
	}
	if cap(s.Stack) < n {
		switch {
		case b == nil:
			s.Stack = make([]byte, n) // a lone sample's buffer is its caller's
		case len(b.arena)-b.arenaUsed >= n:
			// Cut from the window's arena, allocated before the stop.
			s.Stack = b.arena[b.arenaUsed : b.arenaUsed+n : b.arenaUsed+n]
			b.arenaUsed += n
		default:
			n = cap(s.Stack) // the arena is full: the slot's size
		}
	}
	s.Stack = s.Stack[:n]
	if n == 0 {
		return nil
	}
	t.local[0] = unix.Iovec{Base: &s.Stack[0]}
	t.local[0].SetLen(n)
	t.remote[0] = unix.RemoteIovec{Base: uintptr(sp), Len: n}
	got, err := readRemote(th.tid, &t.local[0], &t.remote[0])
	s.Stack = s.Stack[:got]
	if got < n {
		if err == nil {
			err = unix.EFAULT
		}
		s.StackErr = &MemoryError{PID: th.tid, Addr: sp, Len: n, Got: got, Err: err}
	}
	return nil
}

// waitHeld blocks until th reports a stop and holds it there. Any stop
// will do: an interrupt stop, a group-stop, a signal-delivery-stop (its
// signal is kept in th.sig and delivered on resume), a clone or exec event.
// A thread in an uninterruptible sleep gets blockedGrace to stop, then
// ErrThreadBlocked.
func (p *Process) waitHeld(th *thread) error {
	spin, checked := p.tr.spin, false
	for {
		if p.tr.threads[th.tid] != th {
			return ErrThreadExited // dropped by an exec in another thread
		}
		var ws unix.WaitStatus
		var ok bool
		if spin {
			spin = false
			ws, ok = pollStop(th.tid)
		}
		if !ok && !checked {
			checked = true
			var err error
			if ws, ok, err = p.waitUninterruptible(th); err != nil {
				return err
			}
		}
		if !ok {
			var err error
			if ws, ok, err = p.waitStatus(th); err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		held, err := p.onStatus(th, ws, true)
		if err != nil {
			return err
		}
		if held {
			return nil
		}
	}
}

// blockedGrace is how long a wait gives a thread in an uninterruptible
// sleep (state D: a read from a hung NFS server, a vfork parent, a page
// fault on a slow disk) to stop. Such a sleep ignores PTRACE_INTERRUPT
// until it ends, and a tracer asleep in wait4 for that thread would stall
// a whole dump, a tick, or a detach with it: gdb and eu-stack hang there.
// Short D states are common (a disk read, a lock whose holder waits for a
// CPU: 100 ms was exceeded on a loaded 2-core test machine), so the grace
// is generous; it is paid once per stuck thread, which is then marked.
const blockedGrace = time.Second

// waitUninterruptible is the check before a sleeping wait for th, which
// has not stopped yet. If th is in an uninterruptible sleep, it polls for
// th's stop for up to blockedGrace (ok: the status arrived); if th is
// still asleep then, it marks th blocked and returns ErrThreadBlocked. th
// keeps its pending interrupt: it stops when the sleep ends, and that stop
// is taken by whichever wait or drain comes next. Otherwise (not in state
// D, or no longer) the caller's sleeping wait follows.
func (p *Process) waitUninterruptible(th *thread) (ws unix.WaitStatus, ok bool, err error) {
	var deadline time.Time
	for {
		if wpid, ws, err := wait4NoHang(th.tid); err == nil && wpid == th.tid {
			return ws, true, nil
		}
		if state, err := procmaps.ReadThreadState(p.pid, th.tid); err != nil || state != 'D' {
			th.blocked = false
			return 0, false, nil
		}
		switch {
		case th.blocked:
			return 0, false, fmt.Errorf("thread %d: %w", th.tid, ErrThreadBlocked)
		case deadline.IsZero():
			deadline = time.Now().Add(blockedGrace)
		case time.Now().After(deadline):
			th.blocked = true
			return 0, false, fmt.Errorf("thread %d: %w", th.tid, ErrThreadBlocked)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStatus sleeps until th has a wait status and returns it. ok is false
// when it handled other tracees' events instead (the caller asks again).
//
// A main thread's exit is reported only after the other threads' exits
// were reaped, so for it waitStatus handles every tracee's events while
// waiting.
func (p *Process) waitStatus(th *thread) (ws unix.WaitStatus, ok bool, err error) {
	t := p.tr
	if th.tid != p.pid {
		if _, ws, err = wait4(th.tid, 0); err != nil {
			return 0, false, p.gone(th) // ECHILD: reaped already
		}
		return ws, true, nil
	}
	wpid, ws, stray := t.next(0)
	if stray {
		// Poll: our tracees' events hide behind a child's.
		t.drainEach(th)
		if wpid, ws, _ = wait4NoHang(th.tid); wpid != th.tid {
			time.Sleep(time.Millisecond)
			return 0, false, nil
		}
	}
	if wpid < 0 {
		return 0, false, p.gone(th)
	}
	if wpid != th.tid {
		if wpid > 0 {
			t.dispatch(wpid, ws)
		}
		return 0, false, nil
	}
	return ws, true, nil
}

// onStatus applies one wait status of th. With hold (or while frozen) a
// stopped thread is left stopped and onStatus reports true; otherwise it is
// resumed the way the stop requires. A thread exit returns ErrThreadExited
// or ErrProcessExited.
func (p *Process) onStatus(th *thread, ws unix.WaitStatus, hold bool) (bool, error) {
	if ws.Exited() || ws.Signaled() {
		if th.tid == p.pid {
			p.exited = true
		}
		return false, p.gone(th)
	}
	if !ws.Stopped() {
		return false, nil
	}
	th.state, th.groupStop, th.blocked = stateHeld, false, false
	sig := ws.StopSignal()
	switch ptraceEvent(ws) {
	case unix.PTRACE_EVENT_STOP:
		// An interrupt stop, a new thread's first stop, a re-trap after
		// SIGCONT ends a LISTEN (all SIGTRAP), or a group-stop (the stop
		// signal): only the last must be resumed with LISTEN.
		th.groupStop = isStopSignal(sig)
	case unix.PTRACE_EVENT_CLONE:
		if msg, err := unix.PtraceGetEventMsg(th.tid); err == nil {
			// Its first stop may have come (and it may even have exited)
			// before this event: add it unless known. A TID seen before is
			// either that (an exited thread) or a TID the kernel reused
			// (pid_max is often 32768, and thread churn wraps it in
			// seconds): then /proc tells whose tracee it is. Missing a
			// reused TID would leave it traced after Detach.
			if tid := int(msg); p.threads[tid] == nil && (!p.seen[tid] || p.tracedByUs(tid)) {
				p.addThread(tid, stateNewborn)
			}
		}
	case unix.PTRACE_EVENT_EXEC:
		p.execs.Add(1)
		// An execve in another thread: the kernel gave its TID's place to
		// the main thread and reaped the old TID.
		if msg, err := unix.PtraceGetEventMsg(th.tid); err == nil && int(msg) != th.tid {
			if old := p.threads[int(msg)]; old != nil {
				p.forget(old)
			}
		}
		p.leaderZombie = false
	case 0:
		// Signal-delivery-stop: resuming with 0 would discard the signal.
		th.sig = int(sig)
	}
	if hold || p.frozen || th.inFlight {
		// A thread a batch interrupted is held for that batch to sample,
		// whoever waited for its stop (a drain in the middle of the batch).
		return true, nil
	}
	if sig != 0 && ptraceEvent(ws) == 0 {
		p.tr.signalStops++
	}
	p.resume(th)
	return false, nil
}

// resume restarts a held thread: LISTEN after a group-stop (it stays
// stopped but a SIGCONT still wakes it), else CONT with its pending signal.
func (p *Process) resume(th *thread) {
	if th.state != stateHeld {
		return
	}
	if th.groupStop {
		switch err := ptraceReq(unix.PTRACE_LISTEN, th.tid, 0, 0); err {
		case nil:
			th.state = stateListening
		case unix.ESRCH:
			th.state = stateRunning // killed: its exit will be reported
		}
		return
	}
	switch err := ptraceReq(unix.PTRACE_CONT, th.tid, 0, uintptr(th.sig)); err {
	case nil:
		th.sig, th.state = 0, stateRunning
	case unix.ESRCH:
		th.state = stateRunning
	}
}

// release detaches the held thread th at this stop, with its pending
// signal (delivered) and, after a group-stop, back into that stop, as
// Detach would; p forgets it. A thread killed meanwhile stays ours until
// its exit is reported; one the kernel refuses to detach is resumed and
// left for Detach.
func (p *Process) release(th *thread) {
	if th.state != stateHeld {
		return
	}
	switch err := ptraceReq(unix.PTRACE_DETACH, th.tid, 0, uintptr(th.sig)); err {
	case nil:
		if th.sig != 0 {
			p.tr.batch.releasedSignals++
		}
		th.sig = 0
		p.released[th.tid] = true
		p.forget(th)
	case unix.ESRCH:
		th.state = stateRunning // killed: its exit will be reported
	default:
		p.resume(th)
	}
}

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

// Freeze stops every thread and keeps it stopped, for a consistent
// snapshot; Sample then reads without stopping or resuming. Threads created
// meanwhile are caught too. Thaw (or Detach) ends it.
func (p *Process) Freeze() error {
	var err error
	if e := p.tr.do(func() { err = p.freeze() }); e != nil {
		return e
	}
	return err
}

func (p *Process) freeze() error {
	if err := p.usable(); err != nil {
		return err
	}
	if p.lazy {
		return ErrLazyFreeze
	}
	p.frozen = true
	var err error
	p.tr.stopBatch(func() { err = p.stopAll() }, nil)
	return err
}

// stopAll interrupts every running thread at once, then collects the stops.
func (p *Process) stopAll() error {
	for _, th := range p.threads {
		if th.state == stateRunning || th.state == stateListening {
			ptraceReq(unix.PTRACE_INTERRUPT, th.tid, 0, 0)
		}
	}
	for {
		th := p.someUnheld(true)
		if th == nil {
			return nil
		}
		if err := p.waitHeld(th); err == ErrProcessExited {
			return err
		}
	}
}

// someUnheld returns a thread not yet held, the main thread last: a main
// thread's exit is reported only after every other thread was reaped.
// skipBlocked leaves out threads found in an uninterruptible sleep, which
// no wait can hold until it ends.
func (p *Process) someUnheld(skipBlocked bool) *thread {
	var leader *thread
	for _, th := range p.threads {
		if th.state == stateHeld || (skipBlocked && th.blocked) {
			continue
		}
		if th.tid != p.pid {
			return th
		}
		leader = th
	}
	if leader != nil && len(p.threads) > 1 && !p.leaderZombie {
		// Every other thread is held, so none will exit: a zombie main
		// thread (it called pthread_exit) would never report.
		if st, err := procmaps.ReadStat(p.pid, p.pid); err == nil && (st.State == 'Z' || st.State == 'X') {
			p.leaderZombie = true
		}
	}
	if leader != nil && p.leaderZombie {
		p.forget(leader) // never reports a stop; the kernel unlinks it on exit
		return p.someUnheld(skipBlocked)
	}
	return leader
}

// Thaw resumes what Freeze stopped, delivering signals that arrived
// meanwhile; group-stopped threads stay stopped.
func (p *Process) Thaw() error {
	var err error
	if e := p.tr.do(func() {
		if err = p.usable(); err != nil {
			return
		}
		p.frozen = false
		for _, th := range p.threads {
			p.resume(th)
		}
	}); e != nil {
		return e
	}
	return err
}

// Detach detaches every thread: each is stopped, then PTRACE_DETACH'ed with
// its pending signal. A group-stopped process stays stopped. It is
// idempotent, and safe from a signal handler goroutine or a deferred
// recover; an exited process detaches without error. A later call returns
// the first call's error, so a caller that detaches early (at the end of
// sampling) and closes later still reports it.
func (p *Process) Detach() error {
	var err error
	if e := p.tr.do(func() { err = p.detach() }); e != nil {
		if errors.Is(e, ErrTracerClosed) {
			return nil // Close detached everything
		}
		return e
	}
	return err
}

func (p *Process) detach() error {
	if p.detached {
		return p.detachErr
	}
	p.detached = true
	p.frozen = true // hold every stop from here on
	defer delete(p.tr.procs, p.pid)
	var first error
	p.tr.stopBatch(func() { first = p.detachThreads() }, nil)
	p.detachErr = first
	return first
}

// detachThreads stops and detaches every thread, then any stray ones.
func (p *Process) detachThreads() error {
	var first error
	for round := 0; round < 3; round++ {
		for _, th := range p.threads {
			if th.state == stateRunning || th.state == stateListening {
				ptraceReq(unix.PTRACE_INTERRUPT, th.tid, 0, 0)
			}
		}
		for len(p.threads) > 0 {
			th := p.someUnheld(false)
			if th != nil {
				// On exit the thread is forgotten. One that stays in an
				// uninterruptible sleep cannot be detached now; it stops
				// when the sleep ends, and the tracer then detaches it
				// (dispatch: no Process claims it), or the kernel does when
				// the tracer thread ends.
				if err := p.waitHeld(th); errors.Is(err, ErrThreadBlocked) {
					p.forget(th)
					p.tr.leftTraced[th.tid] = struct{}{}
					if first == nil {
						first = fmt.Errorf("%w; it stays traced until it wakes or stacktop exits", err)
					}
				}
				continue
			}
			for _, th := range p.threads {
				err := ptraceReq(unix.PTRACE_DETACH, th.tid, 0, uintptr(th.sig))
				if err != nil && err != unix.ESRCH && first == nil {
					first = fmt.Errorf("detach thread %d: %w", th.tid, err)
				}
				p.forget(th)
			}
		}
		// Backstop: the kernel attaches every new thread to us
		// (TRACECLONE). Under heavy thread churn one can slip past the
		// bookkeeping (a TID reused between its clone event and its first
		// stop); /proc says whose tracee it is, so detach whatever of
		// this process is still ours. Without any new thread since the
		// attach there is nothing to find, and a thousand reads of
		// /proc/TID/status are saved.
		if p.clones == 0 {
			break
		}
		strays := p.strays()
		if len(strays) == 0 {
			break
		}
		for _, tid := range strays {
			p.addThread(tid, stateRunning)
		}
	}
	return first
}

// strays lists the threads of the process still traced by this tracer
// that it does not know of.
func (p *Process) strays() []int {
	tids, err := procmaps.Threads(p.pid)
	if err != nil {
		return nil
	}
	var out []int
	for _, tid := range tids {
		if p.threads[tid] == nil && p.tracedByUs(tid) {
			out = append(out, tid)
		}
	}
	return out
}
