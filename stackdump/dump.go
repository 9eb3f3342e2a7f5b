package stackdump

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"stacktop/procmaps"
	"stacktop/ptrace"
	"stacktop/sampler"
)

// Options select what to dump and how.
type Options struct {
	TID    int  // 0: every thread
	Freeze bool // hold every thread stopped for the whole dump
	// Select, if set, says which threads to dump (--thread-name); the
	// others are not stopped at all (with Freeze they are: a consistent
	// snapshot stops every thread).
	Select  func(tid int) bool
	Sampler sampler.Options
}

// Result is one dump.
type Result struct {
	PID     int
	Command string
	Threads []sampler.ThreadStack // by TID
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
	// and how to get it (a Go program without DWARF: sampler's
	// Target.GoStackNote).
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
	cache := procmaps.NewModuleCache()
	defer cache.Close()
	t, err := sampler.Open(tracer, pid, cache, opt.Sampler)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := t.Close(); derr != nil && err == nil {
			err = fmt.Errorf("detaching from %d: %w", pid, derr)
		}
	}()
	res = &Result{PID: pid, Command: procmaps.Cmdline(pid), Unwinders: t.UnwinderNames()}

	if opt.TID != 0 && !slices.Contains(t.Process().Threads(), opt.TID) {
		return nil, fmt.Errorf("thread %d is not a thread of process %d", opt.TID, pid)
	}
	var frozenAt time.Time
	if opt.Freeze {
		if err := t.Process().Freeze(); err != nil {
			return nil, fmt.Errorf("freezing %d: %w", pid, err)
		}
		frozenAt = time.Now()
	}

	// Threads created while we dump are attached by the kernel (TRACECLONE)
	// and show up in the next listing: keep going until a listing holds no
	// thread we have not seen.
	seen := map[int]bool{}
	for {
		var todo []int
		if opt.TID != 0 {
			todo = []int{opt.TID}
		} else {
			for _, tid := range t.Process().Threads() {
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
		err := t.StackEach(todo, func(ts sampler.ThreadStack, err error) {
			switch {
			case errors.Is(err, ptrace.ErrProcessExited):
				res.ProcessExited = true
			case errors.Is(err, ptrace.ErrThreadExited):
				res.Exited = append(res.Exited, ts.TID)
			case errors.Is(err, ptrace.ErrThreadBlocked):
				ts.Err = &BlockedError{TID: ts.TID, WaitChannel: procmaps.ThreadWaitChannel(pid, ts.TID), Err: err}
				res.Threads = append(res.Threads, ts)
			default:
				if err != nil {
					ts.Err = err
				}
				res.Threads = append(res.Threads, ts)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("sampling %d: %w", pid, err)
		}
		if res.ProcessExited || opt.TID != 0 {
			break
		}
	}
	if opt.Freeze && !res.ProcessExited {
		t.Process().Thaw()
		res.Pauses.Frozen = time.Since(frozenAt)
	}
	slices.SortFunc(res.Threads, func(a, b sampler.ThreadStack) int { return a.TID - b.TID })
	res.Pauses.summarize(res.Threads)
	res.Wall = time.Since(start)
	if n := t.GoStackNote(); n != "" {
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

func (p *Pauses) summarize(threads []sampler.ThreadStack) {
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
