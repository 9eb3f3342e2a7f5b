package stackdump

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/targetfile"
	"codeberg.org/stacktop/stacktop/unwind"
)

// Options select what to dump and how.
type Options struct {
	TID    int  // 0: every thread
	Freeze bool // hold every thread stopped for the whole dump
	// Select, if set, says which threads to dump (--thread-name); the
	// others are not stopped at all (with Freeze they are: a consistent
	// snapshot stops every thread).
	Select func(tid int) bool
	// StackWindow is the bytes of stack copied while a thread is stopped
	// when it is not on a thread stack (on one, its used stack is);
	// 0 means ptracesampler.DefaultStackWindow.
	StackWindow int
	Resolve     resolve.Options // unwinders, depth, symbols
}

// ThreadStack is one thread's named stack.
type ThreadStack struct {
	TID      int
	Name     string // comm
	State    string // R, S, D, T, t, ... as /proc shows it before the sample
	Frames   []profile.Frame
	Complete bool  // the walk reached the outermost frame
	Err      error // why the walk stopped early (Complete false), or the sample failed
	Stopped  time.Duration
	Total    time.Duration
	// StackMissed counts the walk's reads of the thread's stack that the
	// copy taken while it was stopped did not hold: they were read from
	// the live process after it resumed (0 unless a stack is not a
	// thread stack, or larger than the copy may grow).
	StackMissed int
}

// Result is one dump.
type Result struct {
	PID     int
	Command string
	Threads []ThreadStack // by TID
	// Exited lists threads that exited between being listed and sampled.
	Exited []int
	// ProcessExited is set when the whole process went away mid-dump.
	ProcessExited bool
	Pauses        Pauses
	Wall          time.Duration
	// Unwinders are the unwinding methods the walks were allowed, in
	// order (--unwinder, --no-cfi): "sframe", "cfi", "fp", "backchain".
	Unwinders []string
	// Notes are one-line notes for the user about what the stacks lack
	// and how to get it (a Go program without DWARF:
	// resolve.Resolver.GoStackNote).
	Notes []string
}

// Pauses summarises how long threads were stopped: per thread from the stop
// to the resume request, or with Freeze the whole frozen span.
type Pauses struct {
	Min, Median, Max time.Duration
	Frozen           time.Duration // Freeze only
}

// Complete reports whether every dumped thread unwound to its outermost frame.
func (r *Result) Complete() bool {
	for i := range r.Threads {
		if !r.Threads[i].Complete {
			return false
		}
	}
	return len(r.Threads) > 0
}

// ErrNoThreads is returned when nothing could be dumped (the process or the
// requested thread exited before it was sampled).
var ErrNoThreads = errors.New("no thread could be dumped")

// BlockedError is a thread's entry when it could not be stopped: it sleeps
// uninterruptibly in the kernel (a hung NFS read, a vfork parent, a disk
// wait), where PTRACE_INTERRUPT does not reach it until the sleep ends.
// The dump goes on without it instead of hanging as gdb does; its kernel
// wait channel says where it is stuck.
type BlockedError struct {
	TID         int
	WaitChannel string // kernel function, "" if unknown
	Err         error  // wraps ptrace.ErrThreadBlocked
}

func (e *BlockedError) Error() string {
	where := ""
	if e.WaitChannel != "" {
		where = " (kernel: " + e.WaitChannel + ")"
	}
	return "not stopped: in an uninterruptible sleep" + where + "; no user stack until it wakes"
}

func (e *BlockedError) Unwrap() error { return e.Err }

// Run dumps process pid. Whatever happens, every thread it attached is
// detached before Run returns.
func Run(tracer *ptrace.Tracer, pid int, opt Options) (res *Result, err error) {
	start := time.Now()
	if err := resolve.CheckClass(pid); err != nil {
		return nil, err // before attaching: nothing to undo
	}
	cache := modules.NewModuleCache()
	defer cache.Close()
	mem := ptrace.NewMemory(pid)
	defer mem.Close()
	// The resolver reads the maps and opens the modules while the tracer
	// attaches (neither needs the other; a few ms each for 1,000
	// threads), then starts loading the tables of the program and its C
	// library in the background (PrefetchCommon): the first walk and the
	// naming find them loaded or under way. Only arm64's
	// pointer-authentication mask comes from the attached process.
	type newResolver struct {
		r   *resolve.Resolver
		err error
	}
	resolved := make(chan newResolver, 1)
	go func() {
		r, err := resolve.New(pid, mem, cache, opt.Resolve)
		if err == nil {
			r.PrefetchCommon()
		}
		resolved <- newResolver{r, err}
	}()
	d, err := ptracesampler.OpenDump(tracer, pid, opt.StackWindow, opt.Freeze)
	nr := <-resolved
	if nr.r != nil {
		defer nr.r.Close()
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := d.Close(); derr != nil && err == nil {
			err = fmt.Errorf("detaching from %d: %w", pid, derr)
		}
	}()
	if nr.err != nil {
		return nil, nr.err
	}
	r := nr.r
	r.SetPACMask(d.PACMask())
	d.UseMaps(r.Mappings()) // read once, for both
	res = &Result{PID: pid, Command: procmaps.Cmdline(pid), Unwinders: r.UnwinderNames()}

	// (Lazily, Threads' first answer is the open's listing: a thread
	// created since is in the second.)
	if opt.TID != 0 && !slices.Contains(d.Threads(), opt.TID) && !slices.Contains(d.Threads(), opt.TID) {
		return nil, fmt.Errorf("thread %d is not a thread of process %d", opt.TID, pid)
	}
	var frozenAt time.Time
	if opt.Freeze {
		if err := d.Freeze(); err != nil {
			return nil, fmt.Errorf("freezing %d: %w", pid, err)
		}
		frozenAt = time.Now()
	}

	// Threads created while we dump show up in the next listing (/proc's,
	// or with Freeze the kernel attached them: TRACECLONE): keep going
	// until a listing holds no thread we have not seen.
	seen := map[int]bool{}
	for {
		var todo []int
		if opt.TID != 0 {
			todo = []int{opt.TID}
		} else {
			for _, tid := range d.Threads() {
				if !seen[tid] {
					todo = append(todo, tid)
				}
			}
		}
		todo = slices.DeleteFunc(todo, func(tid int) bool { return seen[tid] })
		if len(todo) == 0 {
			break
		}
		slices.Sort(todo)
		for _, tid := range todo {
			seen[tid] = true // a thread Select rejects is asked once
		}
		if opt.Select != nil {
			todo = slices.DeleteFunc(todo, func(tid int) bool { return !opt.Select(tid) })
			if len(todo) == 0 {
				continue // the next listing may still hold new threads
			}
		}
		if err := dumpBatch(d, r, todo, res); err != nil {
			return nil, fmt.Errorf("sampling %d: %w", pid, err)
		}
		if res.ProcessExited || opt.TID != 0 {
			break
		}
	}
	if opt.Freeze && !res.ProcessExited {
		// Detached right at their frozen stops: a thaw first would let
		// every thread run only to stop it again for the detach. (The
		// deferred Close returns this one's error.)
		d.Close()
		res.Pauses.Frozen = time.Since(frozenAt)
	}
	slices.SortFunc(res.Threads, func(a, b ThreadStack) int { return a.TID - b.TID })
	res.Pauses.summarize(res.Threads)
	res.Wall = time.Since(start)
	if n := r.GoStackNote(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	if n := targetfile.StallNote(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	if len(res.Threads) == 0 {
		if res.ProcessExited {
			return res, fmt.Errorf("process %d exited during the dump: %w", pid, ErrNoThreads)
		}
		return res, ErrNoThreads
	}
	return res, nil
}

// batchHeadroom is how much a dump's batch may add to the Go runtime's
// memory, with the collector paused, before the collector runs anyway
// (through the memory limit; a limit the user set, if lower, holds).
// A 1,000-thread dump adds about 14 MB (module tables, line tables, the
// stacks it keeps): with 12 MiB of headroom the collector ran at most
// once during it, and the peak RSS was 26.5-27.6 MB instead of 30-32
// with no limit (at 8 MiB: 24.6-25 MB, but three collections and a
// longest stop of up to 3 ms).
const batchHeadroom = 12 << 20

// pauseGC stops the garbage collector until resume (once; later calls do
// nothing), up to batchHeadroom more memory (see dumpBatch).
func pauseGC() (resume func()) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms) // (stops the world briefly: no thread is stopped yet)
	limit := int64(ms.Sys-ms.HeapReleased) + batchHeadroom
	oldLimit := debug.SetMemoryLimit(min(limit, debug.SetMemoryLimit(-1)))
	oldPercent := debug.SetGCPercent(-1)
	done := false
	return func() {
		if !done {
			done = true
			debug.SetMemoryLimit(oldLimit)
			debug.SetGCPercent(oldPercent)
		}
	}
}

// dumpBatch samples tids in one batch and adds their stacks to res. Only
// the walk runs inside the batch; naming the frames waits until every
// thread was sampled, and the line tables the frames need start loading
// at the walk (PrefetchLines), so they load while the sampling goes on
// instead of holding it up or following it.
func dumpBatch(d *ptracesampler.Dump, r *resolve.Resolver, tids []int, res *Result) error {
	type walked struct {
		ts ThreadStack
		st unwind.Stack
	}
	var out []walked
	// No garbage collection while the batch stops threads: a collection
	// takes the tracer's goroutine off its thread (to scan its stack, or
	// for a stop-the-world phase) and the threads it was about to sample
	// wait, stopped, until the runtime runs it again: 4-15 ms in traced
	// 1,000-thread dumps on a busy 2-CPU machine. The memory limit lets
	// the collector run once the batch has allocated batchHeadroom.
	resumeGC := pauseGC()
	defer resumeGC() // (a panic)
	err := d.Sample(tids, func(info ptracesampler.ThreadInfo, s *backend.Sample, err error) {
		ts := ThreadStack{TID: info.TID, Name: info.Name, State: info.State}
		switch {
		case errors.Is(err, ptracesampler.ErrThreadExited):
			res.Exited = append(res.Exited, ts.TID)
			return
		case errors.Is(err, ptracesampler.ErrThreadBlocked):
			ts.Err = &BlockedError{TID: ts.TID, WaitChannel: procmaps.ThreadWaitChannel(res.PID, ts.TID), Err: err}
		case err != nil:
			ts.Err = err
		default:
			ts.Stopped, ts.Total = s.Pause, s.Total
			st := r.Walk(s) // aliases the resolver's buffer: copied
			ts.StackMissed = s.StackUse.Missed
			st.Frames = slices.Clone(st.Frames)
			r.PrefetchLines(st.Frames)
			out = append(out, walked{ts: ts, st: st})
			return
		}
		out = append(out, walked{ts: ts})
	})
	resumeGC() // naming runs with every thread let go
	if errors.Is(err, backend.ErrExited) {
		res.ProcessExited, err = true, nil
	}
	for _, w := range out {
		if w.ts.Err == nil {
			st := r.Name(w.st)
			w.ts.Frames, w.ts.Complete, w.ts.Err = st.Frames, st.Complete, st.Err
		}
		res.Threads = append(res.Threads, w.ts)
	}
	return err
}

func (p *Pauses) summarize(threads []ThreadStack) {
	var d []time.Duration
	for i := range threads {
		if threads[i].Total > 0 {
			d = append(d, threads[i].Stopped)
		}
	}
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	p.Min, p.Median, p.Max = d[0], d[len(d)/2], d[len(d)-1]
}
