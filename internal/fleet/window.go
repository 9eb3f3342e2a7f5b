package fleet

import (
	"time"

	"stacktop/profile"
)

// threadStack names one (thread, interned stack) total of a profile.
type threadStack struct {
	tid   int
	stack int32
}

// windower cuts a growing profile into windows.
type windower struct {
	prev    map[threadStack]int64 // totals at the previous cut
	prevEnd time.Duration         // the previous cut's end, since Start
}

// cut returns the samples snap holds beyond the previous cut as a profile
// of their own, or nil if there are none. snap must be a later snapshot
// of the same profile as the previous call's.
func (w *windower) cut(snap *profile.Profile) *profile.Profile {
	agg := snap.Aggregate(0)
	end := snap.Duration()
	if w.prev == nil {
		w.prev = map[threadStack]int64{}
	}
	win := profile.New(snap.PID, snap.Command, snap.Start.Add(w.prevEnd), snap.Period)
	win.Wall = snap.Wall
	at := snap.Start.Add(max(end, w.prevEnd))
	for tid, stacks := range agg.ThreadStacks {
		name := ""
		if th := snap.Threads[tid]; th != nil {
			name = th.Name
		}
		for id, n := range stacks {
			k := threadStack{tid, id}
			d := n - w.prev[k]
			if d <= 0 {
				continue
			}
			w.prev[k] = n
			kind := snap.StackKind(id)
			win.Add(profile.Sample{TID: tid, ThreadName: name, Time: at, Frames: snap.Stacks[id], Weight: d,
				State: kind.State, Truncated: kind.Truncated})
		}
	}
	w.prevEnd = max(end, w.prevEnd)
	if win.Samples == 0 {
		return nil
	}
	return win
}
