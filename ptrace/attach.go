//go:build linux

package ptrace

// Attaching: seizing a process's threads (Attach, AttachLazy,
// AttachLazyListed), and a lazy Process's seizing of each thread a batch
// samples. Kept apart from process.go, which holds the Process's state:
// attaching has its own refusals (*AttachError) and retries.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

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
