package profile

import (
	"sort"
	"time"
)

// Folding bounds the memory of a long recording. Events are a timeline:
// a thousand idle threads under --idle add a hundred per second (one per
// thread per RunLimit), forever. Outputs that need only totals (pprof,
// folded, flame graph) never read the timeline's old part, so a Profile
// told to KeepTimeline(d) folds the events that ended more than d (plus
// RunLimit) before the newest sample into Folded, one sum per thread and
// stack, bounded by the number of distinct (thread, stack) pairs instead
// of by the length of the run.
//
// Folding never modifies what a Snapshot shares: it builds new Events and
// Folded slices.
//
// A process that keeps making short-lived threads (a thread per request,
// a pool that churns) brings a new TID with every thread, and a
// (thread, stack) pair for each: bounded by nothing. So folding also
// retires the threads that have no event left in the timeline: their
// folded sums go to one thread per name and process (the first retired),
// the others' records are dropped. A retired thread's samples keep their
// stacks and counts, under its name; its own TID is lost, as perf's and
// py-spy's reports by thread name have it.

// FoldedCount is the number of samples of one thread with one stack that
// were folded out of the timeline.
type FoldedCount struct {
	TID    int32
	Stack  int32
	Weight int64
}

// foldCheckEvery is how many events are appended between two looks at
// whether the timeline's old part is worth folding.
const foldCheckEvery = 4096

// KeepTimeline makes the profile keep at least d of its timeline (the
// last d before the newest sample) as Events and fold what is older into
// Folded. Aggregate(from) stays exact for from <= 0 and for windows no
// longer than d; export formats that draw a timeline (speedscope) need
// d = 0, the default: keep everything.
func (p *Profile) KeepTimeline(d time.Duration) { p.keep = d }

// maybeFold folds the old part of the timeline when it has grown by
// foldCheckEvery events since the last look and at least a quarter of the
// events are old enough: the cost (a pass over the old events and the
// folded sums) is then amortised over the events it frees.
func (p *Profile) maybeFold() {
	if p.keep <= 0 || len(p.Events)-p.foldLook < foldCheckEvery {
		return
	}
	p.foldLook = len(p.Events)
	// Events are ordered by their first sample and span at most RunLimit:
	// the ones starting before cut all ended before end-keep.
	cut := p.end - p.keep - RunLimit
	c := sort.Search(len(p.Events), func(i int) bool { return p.Events[i].Time >= cut })
	if c < len(p.Events)/4 {
		return
	}
	// Threads with events after the cut stay; the others are retired
	// into their name's representative.
	live := map[int32]bool{}
	for _, e := range p.Events[c:] {
		live[e.TID] = true
	}
	into := p.retire(live)
	type key struct{ tid, stack int32 }
	sums := make(map[key]int64, len(p.Folded))
	for _, f := range p.Folded {
		sums[key{into(f.TID), f.Stack}] += f.Weight
	}
	for _, e := range p.Events[:c] {
		sums[key{into(e.TID), e.Stack}] += int64(e.Weight)
	}
	folded := make([]FoldedCount, 0, len(sums))
	for k, w := range sums {
		folded = append(folded, FoldedCount{TID: k.tid, Stack: k.stack, Weight: w})
	}
	sort.Slice(folded, func(i, j int) bool {
		if folded[i].TID != folded[j].TID {
			return folded[i].TID < folded[j].TID
		}
		return folded[i].Stack < folded[j].Stack
	})
	p.Folded = folded
	p.FoldedUntil = max(p.FoldedUntil, p.Events[c-1].End())
	// A new array: snapshots keep theirs.
	p.Events = append(make([]Event, 0, 2*(len(p.Events)-c)+foldCheckEvery), p.Events[c:]...)
	for _, th := range p.Threads {
		if int(th.run) >= c {
			th.run -= int32(c)
		} else {
			th.run = -1 // its run was folded: the next sample starts one
		}
	}
	p.sealed = max(p.sealed-c, 0)
	p.foldLook = len(p.Events)
}

// retire merges the threads not in live into one per (process, name),
// keeping the representative's record (with the others' counts) and
// dropping the others'; it returns the TID each thread's samples now
// count under. The representatives of earlier folds are reused.
func (p *Profile) retire(live map[int32]bool) func(int32) int32 {
	type who struct {
		pid  int
		name string
	}
	reps := map[who]*Thread{}
	for _, th := range p.Threads {
		if th.retired {
			reps[who{th.PID, th.Name}] = th
		}
	}
	moved := map[int32]int32{}
	for tid, th := range p.Threads {
		if live[int32(tid)] || th.retired {
			continue
		}
		k := who{th.PID, th.Name}
		rep := reps[k]
		if rep == nil {
			th.retired = true
			reps[k] = th
			continue
		}
		rep.Samples += th.Samples
		rep.Truncated += th.Truncated
		rep.LastTime = max(rep.LastTime, th.LastTime)
		moved[int32(tid)] = int32(rep.TID)
		th.dropped, th.run = true, -1 // a holder's Repeat must not extend an event
		delete(p.Threads, tid)
	}
	return func(tid int32) int32 {
		if to, ok := moved[tid]; ok {
			return to
		}
		return tid
	}
}

// Dropped reports that t was merged into another record by a fold (its
// thread retired): it is no longer the profile's, and a sample of its
// thread must be added anew (Add), not repeated.
func (t *Thread) Dropped() bool { return t.dropped }

// Minus returns the samples of a that base does not hold, where base is
// the whole-profile aggregate (Aggregate(0)) of an earlier snapshot of the
// same profile: exactly the samples taken since that snapshot, however
// much of the timeline was folded in between (Aggregate(from) cannot tell
// the folded samples' times apart). This is how top's "since reset" stays
// exact on a folded profile. a is modified and returned.
func (a *Aggregate) Minus(base *Aggregate) *Aggregate {
	for id, n := range base.Counts {
		if id < len(a.Counts) {
			a.Counts[id] -= n
		}
	}
	a.Total -= base.Total
	// A thread retired by a fold since base (its samples now under its
	// name's record) is in base and not in a: per thread, its samples
	// before base then count under that record; per stack and in all,
	// every count stays exact.
	for tid, n := range base.ThreadCounts {
		if _, ok := a.ThreadCounts[tid]; !ok {
			continue
		}
		if a.ThreadCounts[tid] -= n; a.ThreadCounts[tid] <= 0 {
			delete(a.ThreadCounts, tid)
		}
	}
	for tid, stacks := range base.ThreadStacks {
		m := a.ThreadStacks[tid]
		if m == nil {
			continue
		}
		for id, n := range stacks {
			if m[id] -= n; m[id] <= 0 {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(a.ThreadStacks, tid)
		}
	}
	a.From = base.To
	return a
}
