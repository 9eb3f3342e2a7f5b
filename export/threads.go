package export

import (
	"strconv"

	"stacktop/profile"
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
// modified; stacks are interned per (stack, thread) pair.
func ThreadRooted(p *profile.Profile) *profile.Profile {
	q := *p
	q.Stacks = nil
	q.Events = make([]profile.Event, 0, len(p.Events))
	type key struct {
		stack int32
		tid   int32
	}
	ids := map[key]int32{}
	for _, e := range p.Events {
		if int(e.Stack) < 0 || int(e.Stack) >= len(p.Stacks) {
			continue
		}
		k := key{e.Stack, e.TID}
		id, ok := ids[k]
		if !ok {
			name := ""
			if th := p.Threads[int(e.TID)]; th != nil {
				name = th.Name
			}
			frames := p.Stacks[e.Stack]
			st := make([]profile.Frame, len(frames), len(frames)+1)
			copy(st, frames)
			st = append(st, profile.Frame{Function: threadRootName(name, int(e.TID))})
			id = int32(len(q.Stacks))
			q.Stacks = append(q.Stacks, st)
			ids[k] = id
		}
		e.Stack = id
		q.Events = append(q.Events, e)
	}
	return &q
}
