package ptracesampler

import (
	"errors"

	"stacktop/internal/backend"
	"stacktop/procmaps"
	"stacktop/ptrace"
)

// Errors a dumped thread can meet, besides backend.ErrExited for the
// whole process. They are ptrace's own, so errors.Is matches either.
var (
	// ErrThreadExited: the thread exited between being listed and sampled.
	ErrThreadExited = ptrace.ErrThreadExited
	// ErrThreadBlocked: the thread sleeps uninterruptibly in the kernel,
	// where a stop request does not reach it; it was left as it was.
	ErrThreadBlocked = ptrace.ErrThreadBlocked
)

// Dump is a one-shot hold on a process, for a pstack-style dump: every
// thread attached (PTRACE_SEIZE), optionally frozen, each thread sampled
// once. Its methods are used from one goroutine; Close detaches on every
// path.
type Dump struct {
	proc   *ptrace.Process
	pid    int
	window int
	sample backend.Sample
	stacks threadStacks // read before each batch (stacks.go)
}

// ThreadInfo is what /proc says of a thread just before its sample: its
// name and state as a user knows them.
type ThreadInfo struct {
	TID   int
	Name  string // comm
	State string // R, S, D, T, t, ... as /proc shows it; "" if unknown
}

// OpenDump attaches to pid through tracer. stackWindow is the bytes copied
// above SP while a thread is stopped (0: DefaultStackWindow) when SP is
// not on a thread stack; on one, its used stack is copied (stacks.go).
func OpenDump(tracer *ptrace.Tracer, pid, stackWindow int) (*Dump, error) {
	if stackWindow <= 0 {
		stackWindow = DefaultStackWindow
	}
	proc, err := tracer.Attach(pid)
	if err != nil {
		return nil, err
	}
	return &Dump{proc: proc, pid: pid, window: stackWindow}, nil
}

// Threads lists the process's threads now, in the tracer's order. Threads
// created during a dump are attached by the kernel and show up in the
// next listing.
func (d *Dump) Threads() []int { return d.proc.Threads() }

// PACMask is the process's pointer-authentication mask on arm64 (0
// elsewhere).
func (d *Dump) PACMask() uint64 {
	m, _ := d.proc.PACMask()
	return m
}

// Freeze stops every thread until Thaw (a consistent snapshot).
func (d *Dump) Freeze() error { return d.proc.Freeze() }

// Thaw resumes what Freeze stopped.
func (d *Dump) Thaw() error { return d.proc.Thaw() }

// Close detaches from every thread. It is safe to call more than once.
func (d *Dump) Close() error { return d.proc.Detach() }

// Sample samples the threads tids in one batch, one trip to the tracer
// thread (ptrace.Process.SampleBatch): a dump of a thousand threads pays
// one hand-off between goroutines, not a thousand. Each thread is stopped
// only while its registers and stack are copied (its used stack if SP is on
// a thread stack, from the maps read once before the batch; else the
// window), and resumed
// before each is called with its sample, which is valid only during the
// call (the consumer walks it there). Names and states are read from /proc
// before the batch, so they describe the threads as they were, not in
// their ptrace stop. A thread that could not be sampled gets err
// (ErrThreadExited, ErrThreadBlocked, ...); once the process is gone the
// batch ends and Sample returns backend.ErrExited, after each was called
// for the threads sampled until then. each must not call back into d.
func (d *Dump) Sample(tids []int, each func(info ThreadInfo, s *backend.Sample, err error)) error {
	infos := make([]ThreadInfo, len(tids))
	for i, tid := range tids {
		ti, _ := procmaps.ReadThreadInfo(d.pid, tid)
		if ti.State == 't' && d.proc.JobStopped(tid) {
			ti.State = 'T' // what it is without stacktop: stopped by a signal
		}
		infos[i] = ThreadInfo{TID: tid, Name: ti.Name, State: stateString(ti.State)}
	}
	exited := false
	d.stacks = readThreadStacks(d.pid)
	o := ptrace.BatchOptions{StackWindow: d.window, WindowAt: d.windowAt}
	err := d.proc.SampleBatch(tids, o, func(i int, s *ptrace.Sample, err error) bool {
		if errors.Is(err, ptrace.ErrProcessExited) {
			exited = true
			return true
		}
		if err != nil {
			each(infos[i], nil, err)
			return true
		}
		d.sample = backend.Sample{TID: tids[i], Regs: s.Regs, StackAddr: s.StackAddr, Stack: s.Stack,
			Pause: s.Stopped, Total: s.Total}
		each(infos[i], &d.sample, nil)
		return true
	})
	if errors.Is(err, ptrace.ErrProcessExited) {
		exited = true
		err = nil
	}
	if err == nil && exited {
		err = backend.ErrExited
	}
	return err
}

// windowAt is the copy of thread tid stopped at sp: its used stack.
func (d *Dump) windowAt(tid int, sp uint64) int {
	return d.stacks.usedStack(sp, d.window, copyLimit(d.window))
}

func stateString(b byte) string {
	if b == 0 {
		return ""
	}
	return string(b)
}
