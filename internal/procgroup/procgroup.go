// Package procgroup samples several processes as one recording: `record`
// and `top` with several -p, or with --subprocesses, which adds the
// children the processes fork while they are sampled.
//
// Lifecycle: the caller attaches to the first process and makes a Member
// of it (its engine, how to detach, how to release it), then New; Attach
// adds the other processes given on the command line, through the attach
// function New was given (the same one that follows children). Run runs
// every engine until ctx ends or all processes exit; Profile and Stats
// merge the engines' results, also while Run runs. Detach detaches from
// every process (call it on every path, before Close); Close releases all
// members but the first, which stays its caller's.
package procgroup

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"codeberg.org/stacktop/stacktop/internal/engine"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
)

// Engine is what the group needs of a process's sampling engine
// (*engine.Engine).
type Engine interface {
	Run(ctx context.Context) error
	Stats() engine.Stats
	Snapshot() *profile.Profile
}

// Member is one process of the group.
type Member struct {
	PID    int
	Engine Engine
	Detach func() error // detaches from the process; its error when it had not exited
	Close  func()       // releases the rest (module cache, a started command)
}

// Group samples several processes into one recording: one Member, and so
// one engine, per process, each run on its own goroutine (over the one
// tracer thread the caller's attach uses). It is a layer above the engine:
// a process's ticks know nothing of the others'. With follow, children
// created after the attach (a fork of any thread of a process of the
// group) join it until they exit.
type Group struct {
	attach func(pid int) (Member, error)

	mu       sync.Mutex
	members  []Member
	known    map[int]bool // PIDs ever in the group, so a child joins once
	errs     []error
	skipped  []string // the first maxSkippedNotes children alive but not followed: why
	nSkipped int      // all of them
	running  int      // engines whose Run has not returned
	wg       sync.WaitGroup
	cancel   context.CancelFunc // ends every engine; set by Run
	panicked *groupPanic        // the first engine's panic, re-raised by Run

	// merger keeps the merged stack ids stable from one Profile() to the
	// next, so top's "since reset" subtracts the right stacks.
	merger profile.Merger
}

// groupPanic is an engine's panic, carried to Run's caller: raised there,
// it passes through the caller's clean-ups and detach.
type groupPanic struct {
	value any
	stack []byte
}

func (p *groupPanic) String() string {
	return fmt.Sprintf("%v\n\nengine goroutine:\n%s", p.value, p.stack)
}

// New makes a group of first, whose Close its caller keeps; attach adds
// a process (Attach, and children with follow).
func New(first Member, attach func(pid int) (Member, error)) *Group {
	fl := &Group{attach: attach, known: map[int]bool{}}
	fl.members = append(fl.members, first)
	fl.known[first.PID] = true
	return fl
}

// Attach adds process pid to the group before Run.
func (fl *Group) Attach(pid int) error {
	_, err := fl.add(pid)
	return err
}

// add attaches to process pid and adds it to the group; its engine
// starts with start.
func (fl *Group) add(pid int) (Member, error) {
	s, err := fl.attach(pid)
	if err != nil {
		return Member{}, err
	}
	fl.mu.Lock()
	fl.members = append(fl.members, s)
	fl.known[pid] = true
	fl.mu.Unlock()
	return s, nil
}

// start runs s's engine until ctx ends or the process exits.
func (fl *Group) start(ctx context.Context, s Member) {
	fl.wg.Add(1)
	fl.mu.Lock()
	fl.running++
	fl.mu.Unlock()
	go func() {
		defer fl.wg.Done()
		defer func() {
			// A panic here would end the program without the caller's
			// detach and clean-up: hand it to Run's caller instead.
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
		err := s.Engine.Run(ctx)
		fl.mu.Lock()
		fl.running--
		if err != nil {
			fl.errs = append(fl.errs, fmt.Errorf("pid %d: %w", s.PID, err))
		}
		fl.mu.Unlock()
	}()
}

// Run starts every engine and waits until all are done; with follow it
// also adds children as they appear, polling every 20 ms.
func (fl *Group) Run(ctx context.Context, follow bool) []error {
	ctx, fl.cancel = context.WithCancel(ctx)
	defer fl.cancel()
	fl.mu.Lock()
	first := slices.Clone(fl.members)
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
					s, err := fl.add(pid)
					if err == nil {
						fl.start(ctx, s)
						continue
					}
					// A child that exited before the attach is simply
					// not followed; one that lives on (a setuid
					// program, a refused perf event) is said to be
					// missing from the recording.
					if comm := procmaps.Comm(pid); comm != "" {
						fl.mu.Lock()
						if fl.nSkipped++; len(fl.skipped) < maxSkippedNotes {
							fl.skipped = append(fl.skipped, fmt.Sprintf("child %d (%s) not recorded: %v", pid, procmaps.EscapeControl(comm), err))
						}
						fl.mu.Unlock()
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
// not in it yet (procmaps.Children).
func (fl *Group) newChildren() []int {
	fl.mu.Lock()
	var pids []int
	for _, s := range fl.members {
		if !s.Engine.Stats().Exited {
			pids = append(pids, s.PID)
		}
	}
	fl.mu.Unlock()
	var out []int
	for _, pid := range pids {
		children, err := procmaps.Children(pid)
		if err != nil {
			continue
		}
		for _, child := range children {
			fl.mu.Lock()
			seen := fl.known[child]
			fl.known[child] = true
			fl.mu.Unlock()
			if !seen {
				out = append(out, child)
			}
		}
	}
	return out
}

// Detach detaches from every process; it returns the first error
// of a process that had not exited.
func (fl *Group) Detach() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	var first error
	for _, s := range fl.members {
		err := s.Detach()
		if err != nil && first == nil && !s.Engine.Stats().Exited {
			first = fmt.Errorf("pid %d: %w", s.PID, err)
		}
	}
	return first
}

// Close releases every member but the first, which its caller owns.
func (fl *Group) Close() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.members[1:] {
		s.Close()
	}
}

// Profile merges the engines' profiles into one, a stack keeping its id
// across calls (see profile.Merger).
func (fl *Group) Profile() *profile.Profile {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	ps := make([]*profile.Profile, len(fl.members))
	for i, s := range fl.members {
		ps[i] = s.Engine.Snapshot()
	}
	return fl.merger.Merge(ps...)
}

// Stats sums the engines' counters for the summary: counts add up; the
// rate is the first process's (each process has its own ticks); pauses
// and tick times are the worst of any process; the recording exited when
// all did. One process's are its engine's own.
func (fl *Group) Stats() (engine.Stats, int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.members) == 1 {
		st := fl.members[0].Engine.Stats()
		st.Notes = append(st.Notes, fl.skippedNotes()...)
		return st, 1
	}
	var sum engine.Stats
	sum.Methods = map[string]int64{}
	sum.Interrupts = map[int]int64{}
	sum.Exited = true
	for i, s := range fl.members {
		st := s.Engine.Stats()
		if i == 0 {
			sum.Rate, sum.Wall, sum.Period = st.Rate, st.Wall, st.Period
		}
		sum.Weight += st.Weight
		sum.Elapsed = max(sum.Elapsed, st.Elapsed)
		sum.Ticks += st.Ticks
		sum.MissedTicks += st.MissedTicks
		sum.Lost += st.Lost
		for _, n := range st.Notes {
			if !slices.Contains(sum.Notes, n) { // every process's perf says the same
				sum.Notes = append(sum.Notes, n)
			}
		}
		sum.Samples += st.Samples
		sum.Stops += st.Stops
		sum.Reused += st.Reused
		sum.Failed += st.Failed
		sum.Gone += st.Gone
		sum.Truncated += st.Truncated
		sum.StackMissed += st.StackMissed
		sum.Threads += st.Threads
		sum.NotTaken += st.NotTaken
		sum.ShortTicks += st.ShortTicks
		sum.Asleep += st.Asleep
		sum.LateStops += st.LateStops
		sum.ProcessCPU += st.ProcessCPU
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
	}
	sum.Notes = append(sum.Notes, fl.skippedNotes()...)
	return sum, len(fl.members)
}

// maxSkippedNotes bounds the notes about children not followed: a shell
// loop that runs a refused program a thousand times says so in a few lines.
const maxSkippedNotes = 3

// skippedNotes are the notes about children not followed. Called with mu
// held.
func (fl *Group) skippedNotes() []string {
	notes := slices.Clone(fl.skipped)
	if more := fl.nSkipped - len(fl.skipped); more > 0 {
		notes = append(notes, fmt.Sprintf("%d more children not recorded", more))
	}
	return notes
}

func worse(a, b engine.PauseStats) engine.PauseStats {
	a.N += b.N
	a.Median, a.P99, a.Max = max(a.Median, b.Median), max(a.P99, b.P99), max(a.Max, b.Max)
	return a
}
