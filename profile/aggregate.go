package profile

import (
	"math"
	"sort"
	"time"
)

// Aggregate is a set of samples summed by stack: the whole profile or a
// time window of it. Everything the outputs draw is computed from it.
type Aggregate struct {
	Stacks [][]Frame // shared with the profile; index = stack id
	Counts []int64   // samples per stack id
	// ThreadCounts holds samples per thread and, per thread, per stack.
	ThreadCounts map[int]int64
	ThreadStacks map[int]map[int32]int64
	Total        int64
	From, To     time.Duration // the window, relative to Profile.Start
}

// Aggregate sums the samples whose time is at or after from (relative to
// Start); from <= 0 takes the whole profile. Events are in the order of
// their first samples and span at most RunLimit, so a window walks back
// only over its own events and those of the RunLimit before it. A run that
// straddles from counts the share of its samples (evenly spaced) from
// from on.
func (p *Profile) Aggregate(from time.Duration) *Aggregate {
	a := &Aggregate{
		Stacks:       p.Stacks,
		Counts:       make([]int64, len(p.Stacks)),
		ThreadCounts: map[int]int64{},
		ThreadStacks: map[int]map[int32]int64{},
		From:         from,
		To:           p.Duration(),
	}
	if from < p.FoldedUntil {
		// Folded samples are all before FoldedUntil. Exact for from <= 0;
		// a window reaching back into the folded part counts all of it
		// (KeepTimeline's d bounds the windows asked for).
		for _, f := range p.Folded {
			a.add(int(f.TID), f.Stack, f.Weight)
		}
	}
	first := 0
	if from > 0 {
		first = sort.Search(len(p.Events), func(i int) bool { return p.Events[i].Time >= from-RunLimit })
	}
	for _, e := range p.Events[first:] {
		w := e.samplesFrom(from)
		if w == 0 {
			continue
		}
		a.add(int(e.TID), e.Stack, w)
	}
	return a
}

func (a *Aggregate) add(tid int, stack int32, w int64) {
	if int(stack) < 0 || int(stack) >= len(a.Counts) {
		return // not a stack of this profile: a copy that forgot to remap it
	}
	a.Counts[stack] += w
	a.Total += w
	a.ThreadCounts[tid] += w
	m := a.ThreadStacks[tid]
	if m == nil {
		m = map[int32]int64{}
		a.ThreadStacks[tid] = m
	}
	m[stack] += w
}

// FunctionStat is one function's share of an aggregate. Self counts samples
// where it is the leaf; Total counts samples where it is anywhere on the
// stack, once per stack even under recursion.
type FunctionStat struct {
	Name   string
	Module string
	Self   int64
	Total  int64
}

type funcKey struct{ name, module string }

// Functions returns per-function self and total counts, by total descending
// (ties by name, so the order is stable from one refresh to the next).
func (a *Aggregate) Functions() []FunctionStat {
	stats := map[funcKey]*FunctionStat{}
	seen := map[funcKey]bool{}
	for id, n := range a.Counts {
		if n == 0 {
			continue
		}
		frames := a.Stacks[id]
		clear(seen)
		for i, f := range frames {
			k := funcKey{f.Name(), f.Module}
			st := stats[k]
			if st == nil {
				st = &FunctionStat{Name: k.name, Module: k.module}
				stats[k] = st
			}
			if i == 0 {
				st.Self += n
			}
			if !seen[k] {
				seen[k] = true
				st.Total += n
			}
		}
	}
	out := make([]FunctionStat, 0, len(stats))
	for _, st := range stats {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Node is one node of the caller-to-callee tree.
type Node struct {
	Name     string
	Module   string
	Self     int64
	Total    int64
	Children []*Node // by Total descending
}

// Tree returns the caller-to-callee tree: the root is a synthetic node that
// holds every sample; its children are the outermost frames.
func (a *Aggregate) Tree() *Node {
	root := &Node{Name: "all"}
	index := map[*Node]map[funcKey]*Node{}
	for id, n := range a.Counts {
		if n == 0 {
			continue
		}
		frames := a.Stacks[id]
		node := root
		node.Total += n
		for i := len(frames) - 1; i >= 0; i-- {
			f := frames[i]
			k := funcKey{f.Name(), f.Module}
			kids := index[node]
			if kids == nil {
				kids = map[funcKey]*Node{}
				index[node] = kids
			}
			child := kids[k]
			if child == nil {
				child = &Node{Name: k.name, Module: k.module}
				kids[k] = child
				node.Children = append(node.Children, child)
			}
			child.Total += n
			node = child
		}
		node.Self += n
	}
	sortTree(root)
	return root
}

func sortTree(n *Node) {
	sort.Slice(n.Children, func(i, j int) bool {
		if n.Children[i].Total != n.Children[j].Total {
			return n.Children[i].Total > n.Children[j].Total
		}
		return n.Children[i].Name < n.Children[j].Name
	})
	for _, c := range n.Children {
		sortTree(c)
	}
}

// samplesFrom is how many of e's samples were taken at or after from.
func (e Event) samplesFrom(from time.Duration) int64 {
	w := int64(e.Weight)
	switch {
	case e.Time >= from:
		return w
	case e.End() < from:
		return 0
	}
	// Sample k of the run is at Time + k*Span/(w-1); count those with k
	// at or above (from-Time)*(w-1)/Span, rounded up (Span > 0 here:
	// Time < from <= End). Floating point: the product can overflow.
	before := int64(math.Ceil(float64(from-e.Time) / float64(e.Span) * float64(w-1)))
	return w - min(before, w)
}
