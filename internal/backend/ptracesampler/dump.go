package ptracesampler

import (
	"errors"
	"runtime"
	"slices"
	"sync"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/regs"
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

// Dump is a one-shot hold on a process, for a pstack-style dump: each
// thread sampled once, seized (PTRACE_SEIZE) by the batch that samples it
// and detached at its sample (ptrace.Tracer.AttachLazy), or, for a frozen
// dump and a stopped process, every thread attached at the open. Its
// methods are used from one goroutine; Close detaches on every path.
type Dump struct {
	proc   *ptrace.Process
	pid    int
	tasks  *procmaps.TaskDir // nil if it could not be opened
	window int
	sample backend.Sample
	stacks threadStacks // read before each batch (stacks.go)
	// maps, if UseMaps gave them, stand for the first batch's reading.
	maps []procmaps.Mapping
	// early holds the threads' stats read while the tracer attached
	// (prefetchStats); nil once the first batch used them.
	early *statPrefetch
	// listed is the listing of /proc/PID/task made at the open, which the
	// stat prefetch and the lazy attach shared: Threads' first answer.
	listed []int
}

// statPrefetch is the stat of every thread listed before the attach,
// read on goroutines of their own while the tracer thread attaches. For
// a thousand threads the reads take 7-14 ms of CPU: read after the
// attach, they added up; a lazy attach takes 2 ms, so the batch waits
// for them, and they are read in parallel parts. The attach does not stop
// threads, so what it reads is what a read just before the batch would
// say, for every thread that existed then (unless the process was
// stopped: the attach wakes such a process's threads to re-trap them, so
// Sample reads them again). The task directory is the first part's until
// done is closed; the other parts open their own.
type statPrefetch struct {
	done  chan struct{}
	stats map[int]procmaps.Stat
}

func prefetchStats(pid int, tasks *procmaps.TaskDir, tids []int) *statPrefetch {
	f := &statPrefetch{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		var err error
		stats := make([]procmaps.Stat, len(tids))
		read := make([]bool, len(tids))
		// In parts, on as many goroutines as CPUs (up to statWorkers):
		// the batch waits for the last stat, and a lazy attach leaves
		// the CPUs to this and the resolver.
		parts := min(runtime.NumCPU(), statWorkers, max(1, len(tids)/statsPerWorker))
		var wg sync.WaitGroup
		for p := range parts {
			lo, hi := p*len(tids)/parts, (p+1)*len(tids)/parts
			dir := tasks
			if p > 0 {
				if dir, err = procmaps.OpenTaskDir(pid); err != nil {
					dir = nil // read by path
				}
			}
			wg.Go(func() {
				if p > 0 && dir != nil {
					defer dir.Close()
				}
				for i := lo; i < hi; i++ {
					var err error
					if dir != nil {
						stats[i], err = dir.Stat(tids[i])
					} else {
						stats[i], err = procmaps.ReadStat(pid, tids[i])
					}
					read[i] = err == nil
				}
			})
		}
		wg.Wait()
		f.stats = make(map[int]procmaps.Stat, len(tids))
		for i, tid := range tids {
			if read[i] {
				f.stats[tid] = stats[i]
			}
		}
	}()
	return f
}

// statWorkers bounds the goroutines that read the stats at the attach;
// statsPerWorker is the fewest threads worth a goroutine of their own.
const (
	statWorkers    = 4
	statsPerWorker = 64
)

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
//
// Only the main thread is seized here (ptrace.Tracer.AttachLazy), so a
// refusal (permissions, ptrace_scope, a container) is an
// *ptrace.AttachError here, as before; every other thread is seized by
// the batch that samples it, right before its stop, and let go at its
// sample. The tracer then never holds more than the main thread and the
// threads in flight, which spares a 1,000-thread dump the seize of every
// thread before the first sample and lets one wait for any tracee poll
// all the threads in flight. With freeze (the caller will Freeze) every
// thread is attached here instead, as a snapshot needs; so is a stopped
// process, whose threads must each stay stopped from their seize on.
func OpenDump(tracer *ptrace.Tracer, pid, stackWindow int, freeze bool) (*Dump, error) {
	if stackWindow <= 0 {
		stackWindow = DefaultStackWindow
	}
	d := &Dump{pid: pid, window: stackWindow}
	// One listing of /proc/PID/task for the stat prefetch, the attach
	// and Threads' first answer (for 1,000 threads, a listing is about
	// a millisecond of kernel time). If it fails, the attach lists and
	// says why.
	listing, _ := ptrace.ListThreads(pid)
	if tasks, err := procmaps.OpenTaskDir(pid); err == nil {
		d.tasks = tasks
		if listing != nil {
			d.early = prefetchStats(pid, tasks, listing.TIDs())
		}
	}
	var proc *ptrace.Process
	var err error
	switch {
	case freeze:
		proc, err = tracer.Attach(pid)
	case listing != nil:
		proc, err = tracer.AttachLazyListed(listing)
	default:
		proc, err = tracer.AttachLazy(pid)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	d.proc = proc
	if listing != nil && proc.Lazy() {
		d.listed = listing.TIDs()
	}
	return d, nil
}

// Threads lists the process's threads to dump, ascending. Lazily
// attached (the default), they are /proc's: every thread alive, those
// Sample already let go included, so a thread created during the dump
// shows up in the next listing. Attached whole (freeze, or a stopped
// process), they are the threads still attached: not those Sample let
// go; a thread created since is attached by the kernel (TRACECLONE) and
// shows up in the next listing.
//
// Lazily, the first answer is the open's listing (which the attach and
// the stat prefetch shared); each later one lists /proc again.
func (d *Dump) Threads() []int {
	if d.proc.Lazy() {
		if tids := d.listed; tids != nil {
			d.listed = nil
			return slices.Clone(tids) // the prefetch's too
		}
		tids, _ := d.proc.ListThreads() // gone: nothing left to dump
		return tids
	}
	return d.proc.Threads()
}

// PACMask is the process's pointer-authentication mask on arm64 (0
// elsewhere).
func (d *Dump) PACMask() uint64 {
	m, _ := d.proc.PACMask()
	return m
}

// UseMaps gives the process's maps, read just before the attach or during
// it, for the next batch to find the threads' stacks in, instead of
// reading them again (for 1,000 threads, 2,000 lines: a millisecond or
// two of kernel time before any thread is sampled). Later batches read
// them afresh. A stack missing from them (a thread created since) only
// makes its copy the fixed window.
func (d *Dump) UseMaps(maps []procmaps.Mapping) { d.maps = maps }

// Freeze stops every thread until Thaw (a consistent snapshot).
func (d *Dump) Freeze() error { return d.proc.Freeze() }

// Thaw resumes what Freeze stopped.
func (d *Dump) Thaw() error { return d.proc.Thaw() }

// Close detaches from every thread; while frozen, right at the frozen
// stops (no thaw needed first). It is safe to call more than once.
func (d *Dump) Close() error {
	if d.early != nil {
		<-d.early.done // the prefetch reads through tasks
		d.early = nil
	}
	if d.tasks != nil {
		d.tasks.Close()
		d.tasks = nil
	}
	if d.proc == nil {
		return nil // the attach failed
	}
	return d.proc.Detach()
}

// Sample samples the threads tids in one batch (ptrace.Process.SampleBatch,
// one trip to the tracer thread per window of threads), each thread
// stopped only while its registers and stack are copied (its used stack if
// SP is on a thread stack, from the maps read once before the batch or
// given by UseMaps; else
// the window) and detached right there (BatchOptions.Release; while
// frozen, only read): once sampled, a thread is no longer traced, and no
// second stop detaches it at Close. each is called after the thread was
// let go, with its sample, which is valid only during the call (the
// consumer walks it there). Names and states are read from /proc before
// any thread is stopped (stat only, through the open task directory):
// while the tracer attached (prefetchStats), or, for a thread created
// since, just before the batch. They describe the threads as they were,
// not in their ptrace stop. (Read on another goroutine during the batch,
// they made the tracer thread wait for a CPU while it held threads
// stopped: the longest stop grew fourfold on a loaded 2-CPU machine.)
//
// A thread that could not be sampled gets err (ErrThreadExited,
// ErrThreadBlocked, ...); once the process is gone the batch ends and
// Sample returns backend.ErrExited, after each was called for the threads
// sampled until then. each must not call back into d.
func (d *Dump) Sample(tids []int, each func(info ThreadInfo, s *backend.Sample, err error)) error {
	var early map[int]procmaps.Stat
	if d.early != nil {
		<-d.early.done
		if !d.proc.WasStopped() {
			// (The attach wakes a stopped process's threads to re-trap
			// them: read during it, they may show R.)
			early = d.early.stats
		}
		d.early = nil
	}
	infos := make([]ThreadInfo, len(tids))
	for i, tid := range tids {
		st, ok := early[tid]
		if !ok {
			st = d.stat(tid) // a thread created since
		}
		infos[i] = d.info(tid, st)
	}
	exited := false
	if d.maps != nil {
		d.stacks, d.maps = stacksOf(d.maps), nil
	} else {
		d.stacks = readThreadStacks(d.pid)
	}
	o := ptrace.BatchOptions{StackWindow: d.window, WindowAt: d.windowAt, MaxWindow: copyLimit(d.window), Release: true, Overlap: true}
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

// windowAt is the copy of thread tid stopped with registers r: its used
// stack.
func (d *Dump) windowAt(tid int, r *regs.Set) int {
	return d.stacks.usedStack(r.SP(), r.TLS, d.window, copyLimit(d.window))
}

// stat reads thread tid's stat (zero if it cannot).
func (d *Dump) stat(tid int) procmaps.Stat {
	var st procmaps.Stat
	if d.tasks != nil {
		st, _ = d.tasks.Stat(tid)
	} else {
		st, _ = procmaps.ReadStat(d.pid, tid)
	}
	return st
}

// info is thread tid's name and state, from its stat st.
func (d *Dump) info(tid int, st procmaps.Stat) ThreadInfo {
	if st.State == 't' && d.proc.JobStopped(tid) {
		st.State = 'T' // what it is without stacktop: stopped by a signal
	}
	return ThreadInfo{TID: tid, Name: st.Comm, State: stateString(st.State)}
}

func stateString(b byte) string {
	if b == 0 {
		return ""
	}
	return string(b)
}
