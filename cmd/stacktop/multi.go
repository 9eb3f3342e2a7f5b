package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"stacktop/live"
	"stacktop/profile"
	"stacktop/ptrace"
	"stacktop/sampler"
	"stacktop/tui"
)

// pidList is -p: a comma-separated list of PIDs, and the flag may repeat.
type pidList []int

func (l *pidList) String() string {
	parts := make([]string, len(*l))
	for i, p := range *l {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ",")
}

func (l *pidList) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			return fmt.Errorf("bad process id %q", f)
		}
		for _, p := range *l {
			if p == pid {
				return fmt.Errorf("process %d given twice", pid)
			}
		}
		*l = append(*l, pid)
	}
	return nil
}

// threadFilter keeps the threads whose name matches --thread-name. It is
// applied to the profile, not to sampling: a thread often names itself
// after it starts, so its name at the first sample can be a stale one.
func threadFilter(re *regexp.Regexp) func(*profile.Profile) *profile.Profile {
	if re == nil {
		return func(p *profile.Profile) *profile.Profile { return p }
	}
	return func(p *profile.Profile) *profile.Profile {
		return p.SelectThreads(func(th *profile.Thread) bool { return re.MatchString(th.Name) })
	}
}

// processGroup samples several processes into one recording: one session, and so
// one engine, per process, each run on its own goroutine over the one
// tracer thread. It is a layer above the engine: a process's ticks know
// nothing of the others'. With follow, children created after the attach
// (a fork of any thread of a process of the group) join it until they exit.
type processGroup struct {
	tr   *ptrace.Tracer
	f    *samplingFlags
	opts sampler.EngineOptions

	mu       sync.Mutex
	sessions []*session
	known    map[int]bool // PIDs ever in the group, so a child joins once
	errs     []error
	running  int // engines whose Run has not returned
	wg       sync.WaitGroup
	cancel   context.CancelFunc // ends every engine; set by run
	panicked *groupPanic        // the first engine's panic, re-raised by run

	// merger keeps the merged stack ids stable from one profile() to the
	// next, so top's "since reset" subtracts the right stacks.
	merger profile.Merger
}

// groupPanic is an engine's panic, carried to run's caller: raised there,
// it passes through the command's clean-ups and withTracer's detach.
type groupPanic struct {
	value any
	stack []byte
}

func (p *groupPanic) String() string {
	return fmt.Sprintf("%v\n\nengine goroutine:\n%s", p.value, p.stack)
}

func newProcessGroup(tr *ptrace.Tracer, f *samplingFlags, opts sampler.EngineOptions, first *session) *processGroup {
	fl := &processGroup{tr: tr, f: f, opts: opts, known: map[int]bool{}}
	fl.sessions = append(fl.sessions, first)
	fl.known[first.target.PID] = true
	return fl
}

// attach adds process pid to the group; its engine starts with start.
func (fl *processGroup) attach(pid int) (*session, error) {
	g := *fl.f
	g.pid, g.pids = pid, nil
	s, err := g.startSession(fl.tr, nil, [3]*os.File{}, fl.opts)
	if err != nil {
		return nil, err
	}
	fl.mu.Lock()
	fl.sessions = append(fl.sessions, s)
	fl.known[pid] = true
	fl.mu.Unlock()
	return s, nil
}

// start runs s's engine until ctx ends or the process exits.
func (fl *processGroup) start(ctx context.Context, s *session) {
	fl.wg.Add(1)
	fl.mu.Lock()
	fl.running++
	fl.mu.Unlock()
	go func() {
		defer fl.wg.Done()
		defer func() {
			// A panic here would end the program without withTracer's
			// detach and clean-up: hand it to run's caller instead.
			if p := recover(); p != nil {
				fl.mu.Lock()
				fl.running--
				if fl.panicked == nil {
					fl.panicked = &groupPanic{p, debug.Stack()}
				}
				fl.mu.Unlock()
				fl.cancel()
			}
		}()
		err := s.engine.Run(ctx)
		fl.mu.Lock()
		fl.running--
		if err != nil {
			fl.errs = append(fl.errs, fmt.Errorf("pid %d: %w", s.target.PID, err))
		}
		fl.mu.Unlock()
	}()
}

// run starts every engine and waits until all are done; with follow it
// also adds children as they appear, polling every 20 ms.
func (fl *processGroup) run(ctx context.Context, follow bool) []error {
	ctx, fl.cancel = context.WithCancel(ctx)
	defer fl.cancel()
	fl.mu.Lock()
	first := slices.Clone(fl.sessions)
	fl.mu.Unlock()
	for _, s := range first {
		fl.start(ctx, s)
	}
	if follow {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	poll:
		for {
			select {
			case <-ctx.Done():
				break poll
			case <-tick.C:
				for _, pid := range fl.newChildren() {
					// A child may exit or exec before we attach: it is
					// then simply not followed.
					if s, err := fl.attach(pid); err == nil {
						fl.start(ctx, s)
					}
				}
				fl.mu.Lock()
				n := fl.running
				fl.mu.Unlock()
				if n == 0 {
					break poll
				}
			}
		}
	}
	fl.wg.Wait()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.panicked != nil {
		panic(fl.panicked.String())
	}
	return fl.errs
}

// newChildren lists the children of the group's live processes that are
// not in it yet, from /proc/PID/task/TID/children.
func (fl *processGroup) newChildren() []int {
	fl.mu.Lock()
	var pids []int
	for _, s := range fl.sessions {
		if !s.engine.Stats().Exited {
			pids = append(pids, s.target.PID)
		}
	}
	fl.mu.Unlock()
	var out []int
	for _, pid := range pids {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			continue
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				child, err := strconv.Atoi(f)
				if err != nil {
					continue
				}
				fl.mu.Lock()
				seen := fl.known[child]
				fl.known[child] = true
				fl.mu.Unlock()
				if !seen {
					out = append(out, child)
				}
			}
		}
	}
	return out
}

// closeTargets detaches from every process; it returns the first error
// of a process that had not exited.
func (fl *processGroup) closeTargets() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	var first error
	for _, s := range fl.sessions {
		err := s.target.Close()
		if err != nil && first == nil && !s.engine.Stats().Exited {
			first = fmt.Errorf("pid %d: %w", s.target.PID, err)
		}
	}
	return first
}

// close releases every session but the first, which its caller owns.
func (fl *processGroup) close() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.sessions[1:] {
		s.close()
	}
}

// profile merges the engines' profiles into one, a stack keeping its id
// across calls (see profile.Merger).
func (fl *processGroup) profile() *profile.Profile {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	ps := make([]*profile.Profile, len(fl.sessions))
	for i, s := range fl.sessions {
		ps[i] = s.engine.Snapshot()
	}
	return fl.merger.Merge(ps...)
}

// stats sums the engines' counters for the summary: counts add up; the
// rate is the first process's (each process has its own ticks); pauses
// and tick times are the worst of any process; the recording exited when
// all did. One process's are its engine's own.
func (fl *processGroup) stats() (sampler.Stats, int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.sessions) == 1 {
		return fl.sessions[0].engine.Stats(), 1
	}
	var sum sampler.Stats
	sum.Methods = map[string]int64{}
	sum.Interrupts = map[int]int64{}
	sum.Exited = true
	for i, s := range fl.sessions {
		st := s.engine.Stats()
		if i == 0 {
			sum.Rate, sum.Wall, sum.Period = st.Rate, st.Wall, st.Period
		}
		sum.Weight += st.Weight
		sum.Elapsed = max(sum.Elapsed, st.Elapsed)
		sum.Ticks += st.Ticks
		sum.MissedTicks += st.MissedTicks
		sum.Samples += st.Samples
		sum.Stops += st.Stops
		sum.Reused += st.Reused
		sum.Failed += st.Failed
		sum.Gone += st.Gone
		sum.Truncated += st.Truncated
		sum.Threads += st.Threads
		sum.NotTaken += st.NotTaken
		sum.ShortTicks += st.ShortTicks
		sum.TickWork = max(sum.TickWork, st.TickWork)
		sum.TickWorkMax = max(sum.TickWorkMax, st.TickWorkMax)
		for m, n := range st.Methods {
			sum.Methods[m] += n
		}
		for tid, n := range st.Interrupts {
			sum.Interrupts[tid] += n // TIDs are unique across processes
		}
		sum.Pause = worse(sum.Pause, st.Pause)
		sum.PauseTotal = worse(sum.PauseTotal, st.PauseTotal)
		sum.Exited = sum.Exited && st.Exited
		if st.LastErr != nil {
			sum.LastErr = st.LastErr
		}
		sum.Notes = append(sum.Notes, st.Notes...)
	}
	return sum, len(fl.sessions)
}

func worse(a, b sampler.PauseStats) sampler.PauseStats {
	a.N += b.N
	a.Median, a.P99, a.Max = max(a.Median, b.Median), max(a.P99, b.P99), max(a.Max, b.Max)
	return a
}

// groupSource is top's tui.Source over a processGroup: each poll merges the
// engines' snapshots (the cost of one profile.Merge per refresh).
type groupSource struct {
	fl     *processGroup
	filter func(*profile.Profile) *profile.Profile
}

func (s groupSource) Snapshot() tui.Status {
	st, n := s.fl.stats()
	out := live.Status(st, s.filter(s.fl.profile()))
	if st.Exited {
		out.ExitMsg = fmt.Sprintf("all %d processes exited", n)
	}
	return out
}
