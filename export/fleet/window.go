package fleet

import (
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// threadStack names one (thread, interned stack) total of a profile.
type threadStack struct {
	tid   int
	stack int32
}

// windower cuts a growing profile into windows.
type windower struct {
	prev      map[threadStack]int64 // totals at the previous cut
	prevStack []int64               // per stack, at the previous cut
	prevEnd   time.Duration         // the previous cut's end, since Start
}

// cut returns the samples snap holds beyond the previous cut as a profile
// of their own, or nil if there are none. snap must be a later snapshot
// of the same profile as the previous call's.
//
// The new samples of a stack are its total's growth, which is exact. Who
// they go to is each (thread, stack) total's growth, capped at that: a
// fold retires threads into one record per name (profile.KeepTimeline),
// whose total then takes in their earlier samples, counted before.
// Threads gone from the profile are forgotten.
func (w *windower) cut(snap *profile.Profile) *profile.Profile {
	agg := snap.Aggregate(0)
	end := snap.Duration()
	prev := w.prev
	w.prev = make(map[threadStack]int64, len(prev))
	left := make([]int64, len(agg.Counts)) // each stack's new samples
	for id, n := range agg.Counts {
		if id < len(w.prevStack) {
			n -= w.prevStack[id]
		}
		left[id] = n
	}
	w.prevStack = append(w.prevStack[:0], agg.Counts...)
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
			w.prev[k] = n
			d := min(n-prev[k], left[id])
			if d <= 0 {
				continue
			}
			left[id] -= d
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
