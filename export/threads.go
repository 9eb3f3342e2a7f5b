package export

import (
	"strconv"

	"codeberg.org/stacktop/stacktop/profile"
)

// threadRootName is the root frame of a thread's stacks under --threads:
// "NAME TID", as py-spy --threads and perf --per-thread name them.
func threadRootName(name string, tid int) string {
	if name == "" {
		name = "thread"
	}
	return name + " " + strconv.Itoa(tid)
}

// ThreadRooted returns a copy of p in which every stack has one more
// outermost frame, "NAME TID" of the thread it was sampled on, so the
// formats that draw one tree (folded, svg) split it by thread. p is not
// modified; stacks are interned per (stack, thread) pair, for the events
// and the folded samples (see profile.KeepTimeline) alike.
func ThreadRooted(p *profile.Profile) *profile.Profile {
	q := *p
	q.Stacks, q.StackKinds = nil, nil // the outputs that root by thread draw no kinds
	q.Events = make([]profile.Event, 0, len(p.Events))
	q.Folded = make([]profile.FoldedCount, 0, len(p.Folded))
	type key struct {
		stack int32
		tid   int32
	}
	ids := map[key]int32{}
	// rooted returns the id of stack rooted at thread tid; ok is false
	// for a stack id p does not hold.
	rooted := func(stack, tid int32) (int32, bool) {
		if int(stack) < 0 || int(stack) >= len(p.Stacks) {
			return 0, false
		}
		k := key{stack, tid}
		id, ok := ids[k]
		if !ok {
			name := ""
			if th := p.Threads[int(tid)]; th != nil {
				name = th.Name
			}
			frames := p.Stacks[stack]
			st := make([]profile.Frame, len(frames), len(frames)+1)
			copy(st, frames)
			st = append(st, profile.Frame{Function: threadRootName(name, int(tid))})
			id = int32(len(q.Stacks))
			q.Stacks = append(q.Stacks, st)
			ids[k] = id
		}
		return id, true
	}
	for _, f := range p.Folded {
		if id, ok := rooted(f.Stack, f.TID); ok {
			f.Stack = id
			q.Folded = append(q.Folded, f)
		}
	}
	for _, e := range p.Events {
		if id, ok := rooted(e.Stack, e.TID); ok {
			e.Stack = id
			q.Events = append(q.Events, e)
		}
	}
	return &q
}
