package profile

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Merger merges successive snapshots of the same profiles, given in the
// same order each time (more may be appended), with stable stack ids: a
// stack keeps the id it got at its first merge, so an Aggregate of an
// earlier merge (top's reset base, see Aggregate.Minus) names the same
// stacks as a later one. The zero Merger is ready; it is not safe for
// concurrent use.
type Merger struct {
	acc *Profile // only its interned stacks, index and methods are used
	// ids[i][j] is the merged id of stack j of input i; seen[i][j] the
	// frames it had then, to tell a later SetFrames.
	ids  [][]int32
	seen [][][]Frame
}

// Merge returns one profile holding the samples of several, each recorded
// from its own process (record -p A,B, --subprocesses): stacks are
// interned again, event times moved to the earliest Start, and each
// thread keeps its process in Thread.PID. TIDs are unique across the
// system while the threads live, so threads stay apart. The inputs are
// not modified; the result is read-only, like a Snapshot. A single
// profile is copied too (its Command unchanged), so the ids stay put when
// a second process joins.
func (m *Merger) Merge(ps ...*Profile) *Profile {
	if len(ps) == 0 {
		return New(0, "", time.Time{}, 0)
	}
	if m.acc == nil {
		m.acc = New(0, "", time.Time{}, 0)
	}
	for len(m.ids) < len(ps) {
		m.ids, m.seen = append(m.ids, nil), append(m.seen, nil)
	}
	start := ps[0].Start
	var cmds []string
	for _, p := range ps {
		if p.Start.Before(start) {
			start = p.Start
		}
		cmds = append(cmds, "pid "+strconv.Itoa(p.PID)+": "+p.Command)
	}
	// Intern every input's new stacks, and follow SetFrames of old ones.
	for i, p := range ps {
		for j, st := range p.Stacks {
			if j < len(m.ids[i]) {
				if !sameFrames(m.seen[i][j], st) {
					m.acc.SetFrames(m.ids[i][j], st)
					m.seen[i][j] = st
				}
				continue
			}
			m.ids[i] = append(m.ids[i], m.acc.intern(st, p.StackKind(int32(j))))
			m.seen[i] = append(m.seen[i], st)
		}
	}
	// A copy of the first keeps its settings (Period, and whatever else
	// describes how the samples were taken); its contents start empty.
	first := *ps[0]
	out := &first
	out.Start = start
	if len(ps) > 1 { // one keeps its own
		out.Command = strings.Join(cmds, "; ")
	}
	n := len(m.acc.Stacks)
	out.Stacks, out.methods = m.acc.Stacks[:n:n], m.acc.methods[:n:n]
	out.StackKinds = m.acc.StackKinds[:len(m.acc.StackKinds):len(m.acc.StackKinds)]
	out.uses = make([]int64, n)
	m.acc.shared = true // out shares the arrays: SetFrames copies them
	out.Events, out.Threads, out.Folded = nil, map[int]*Thread{}, nil
	out.Samples, out.Truncated, out.Missed, out.Errors = 0, 0, 0, 0
	out.sealed, out.end, out.FoldedUntil = 0, 0, 0
	for i, p := range ps {
		shift := p.Start.Sub(start)
		ids := m.ids[i]
		for j := range p.Stacks {
			if j < len(p.uses) {
				out.uses[ids[j]] += p.uses[j]
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
		// Folded samples all precede their profile's FoldedUntil; the
		// latest of those, shifted, bounds them all.
		for _, f := range p.Folded {
			if int(f.Stack) < 0 || int(f.Stack) >= len(ids) {
				continue
			}
			f.Stack = ids[f.Stack]
			out.Folded = append(out.Folded, f)
		}
		if len(p.Folded) > 0 {
			out.FoldedUntil = max(out.FoldedUntil, p.FoldedUntil+shift)
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

// sameFrames tells whether a and b are the same stored stack (SetFrames
// stores a new slice; interned stacks are never modified in place).
func sameFrames(a, b []Frame) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
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
		q.Truncated += th.Truncated
	}
	for _, e := range p.Events {
		if q.Threads[int(e.TID)] != nil {
			q.Events = append(q.Events, e)
		}
	}
	q.Folded = nil
	for _, f := range p.Folded {
		if q.Threads[int(f.TID)] != nil {
			q.Folded = append(q.Folded, f)
		}
	}
	q.sealed = len(q.Events)
	q.index, q.keyBuf = nil, nil
	return &q
}

// OnlyStates returns a copy of p with the samples whose thread state keep
// accepts (StackState of their stack; StateUnknown where the samples
// carried none), for a view of blocked time only. Stacks and threads are
// shared with p; the counters are those of the samples kept. The copy is
// for reading (outputs): nothing may be added to it.
func (p *Profile) OnlyStates(keep func(ThreadState) bool) *Profile {
	q := *p
	q.Events, q.Folded = nil, nil
	q.Samples, q.Truncated = 0, 0
	for _, e := range p.Events {
		if keep(p.StackState(e.Stack)) {
			q.Events = append(q.Events, e)
			q.Samples += int64(e.Weight)
		}
	}
	for _, f := range p.Folded {
		if keep(p.StackState(f.Stack)) {
			q.Folded = append(q.Folded, f)
			q.Samples += f.Weight
		}
	}
	q.sealed = len(q.Events)
	q.shared = true
	return &q
}
