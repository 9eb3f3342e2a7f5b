package profile

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Merge returns one profile holding the samples of several, each recorded
// from its own process (record -p A,B, --subprocesses): stacks are
// interned again, event times moved to the earliest Start, and each
// thread keeps its process in Thread.PID. TIDs are unique across the
// system while the threads live, so threads stay apart. The inputs are
// not modified; the result is read-only, like a Snapshot. Merge of one
// profile returns it.
func Merge(ps ...*Profile) *Profile {
	if len(ps) == 1 {
		return ps[0]
	}
	if len(ps) == 0 {
		return New(0, "", time.Time{}, 0)
	}
	start := ps[0].Start
	var cmds []string
	for _, p := range ps {
		if p.Start.Before(start) {
			start = p.Start
		}
		cmds = append(cmds, "pid "+strconv.Itoa(p.PID)+": "+p.Command)
	}
	// A copy of the first keeps its settings (Period, and whatever else
	// describes how the samples were taken); its contents start empty.
	first := *ps[0]
	out := &first
	out.Command, out.Start = strings.Join(cmds, "; "), start
	out.Stacks, out.Events, out.Threads = nil, nil, map[int]*Thread{}
	out.Samples, out.Truncated, out.Missed, out.Errors = 0, 0, 0, 0
	out.index, out.keyBuf, out.methods, out.uses = map[string]int32{}, nil, nil, nil
	out.sealed, out.end = 0, 0
	for _, p := range ps {
		shift := p.Start.Sub(start)
		ids := make([]int32, len(p.Stacks))
		for i, st := range p.Stacks {
			ids[i] = out.intern(st)
			if i < len(p.uses) {
				out.uses[ids[i]] += p.uses[i]
			}
		}
		for _, e := range p.Events {
			if int(e.Stack) < 0 || int(e.Stack) >= len(ids) {
				continue
			}
			e.Time += shift
			e.Stack = ids[e.Stack]
			out.Events = append(out.Events, e)
		}
		for tid, th := range p.Threads {
			t := *th
			if t.PID == 0 {
				t.PID = p.PID
			}
			if t.LastStack >= 0 && int(t.LastStack) < len(ids) {
				t.LastStack = ids[t.LastStack]
			}
			t.LastTime += shift
			t.run = -1
			out.Threads[tid] = &t
		}
		out.Samples += p.Samples
		out.Truncated += p.Truncated
		out.Missed += p.Missed
		out.Errors += p.Errors
		out.end = max(out.end, p.end+shift)
	}
	// Aggregate's windows need the events in the order of their times.
	slices.SortStableFunc(out.Events, func(a, b Event) int {
		switch {
		case a.Time < b.Time:
			return -1
		case a.Time > b.Time:
			return 1
		}
		return 0
	})
	out.sealed = len(out.Events)
	out.index, out.keyBuf = nil, nil
	return out
}

// SelectThreads returns a read-only copy of p holding only the samples of
// the threads keep accepts (--thread-name), with the counters of the
// samples kept. Stacks are shared with p.
func (p *Profile) SelectThreads(keep func(*Thread) bool) *Profile {
	q := *p
	q.Threads = map[int]*Thread{}
	for tid, th := range p.Threads {
		if keep(th) {
			q.Threads[tid] = th
		}
	}
	q.Events = make([]Event, 0, len(p.Events))
	q.Samples, q.Truncated = 0, 0
	for _, th := range q.Threads {
		q.Samples += th.Samples
	}
	for _, e := range p.Events {
		if q.Threads[int(e.TID)] != nil {
			q.Events = append(q.Events, e)
		}
	}
	q.sealed = len(q.Events)
	q.index, q.keyBuf = nil, nil
	return &q
}
