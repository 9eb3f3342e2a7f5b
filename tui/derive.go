package tui

import (
	"sort"
	"strings"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// viewData is everything the three views draw, computed in Update from the
// shown snapshot whenever it or a setting (window, reset, filter, sort)
// changes, so View only formats it.
type viewData struct {
	from, to time.Duration // the aggregated window, relative to Profile.Start
	total    int64         // samples in the window, before filtering
	matched  int64         // of which on a stack the filter matches
	funcs    []profile.FunctionStat
	tree     *profile.Node
	hot      map[string]bool // paths of the hottest chain, open by default
	threads  []threadRow
	// threadsTotal is the window's samples of every thread, which the
	// threads view's shares are of even while a thread is in focus.
	threadsTotal int64
}

type threadRow struct {
	TID     int
	Name    string
	Samples int64           // in the window
	Stack   []profile.Frame // latest stack, leaf first; nil if none
}

// windowStart is where the aggregation starts: the reset offset, and in
// window mode the newest sample's time minus the window length. The window
// ends at the newest sample, not at the wall clock, so a frozen or exited
// target keeps its last window on screen.
func windowStart(p *profile.Profile, cumulative bool, window, since time.Duration) time.Duration {
	from := since
	if !cumulative {
		if w := p.Duration() - window; w > from {
			from = w
		}
	}
	return from
}

// derive aggregates p from from (or, given base, the aggregate at a reset,
// everything since base) and applies the filter: functions whose
// name or module does not contain it are hidden; the tree keeps only the
// stacks with a matching frame; a thread stays if its name or latest stack
// matches. Percentages stay relative to the unfiltered window total.
// A focus TID restricts the functions and the tree to that thread's
// samples (its stacks), their percentages then of the thread's samples.
// A non-nil base is the aggregate at a reset: the view is what came since.
func derive(p *profile.Profile, from time.Duration, base *profile.Aggregate, filter string, bySelf bool, focus int) viewData {
	var all *profile.Aggregate
	if base != nil {
		all = p.Aggregate(0).Minus(base) // since the reset (see model.resetBase)
		all.From = from
	} else {
		all = p.Aggregate(from)
	}
	a := all
	if focus != 0 {
		fc := *all
		fc.Counts = make([]int64, len(all.Counts))
		fc.Total = 0
		for id, n := range all.ThreadStacks[focus] {
			fc.Counts[id] = n
			fc.Total += n
		}
		fc.ThreadCounts = map[int]int64{focus: fc.Total}
		fc.ThreadStacks = map[int]map[int32]int64{focus: all.ThreadStacks[focus]}
		a = &fc
	}
	d := viewData{from: from, to: a.To, total: a.Total, matched: a.Total, threadsTotal: all.Total}
	needle := strings.ToLower(filter)

	fa := a
	if needle != "" {
		fc := *a
		fc.Counts = make([]int64, len(a.Counts))
		d.matched = 0
		for id, n := range a.Counts {
			if n != 0 && stackMatches(a.Stacks[id], needle) {
				fc.Counts[id] = n
				d.matched += n
			}
		}
		fa = &fc
	}

	for _, f := range a.Functions() {
		if needle == "" || contains(f.Name, needle) || contains(f.Module, needle) {
			d.funcs = append(d.funcs, f)
		}
	}
	sortFunctions(d.funcs, bySelf)

	d.tree = fa.Tree()
	d.hot = map[string]bool{}
	path := ""
	for n := d.tree; len(n.Children) > 0; n = n.Children[0] {
		path = childPath(path, n.Children[0])
		d.hot[path] = true
	}

	for tid, th := range p.Threads {
		row := threadRow{TID: tid, Name: th.Name, Samples: all.ThreadCounts[tid]}
		if th.LastStack >= 0 && int(th.LastStack) < len(p.Stacks) {
			row.Stack = p.Stacks[th.LastStack]
		}
		if needle != "" && !contains(row.Name, needle) && !stackMatches(row.Stack, needle) {
			continue
		}
		d.threads = append(d.threads, row)
	}
	sort.Slice(d.threads, func(i, j int) bool {
		if d.threads[i].Samples != d.threads[j].Samples {
			return d.threads[i].Samples > d.threads[j].Samples
		}
		return d.threads[i].TID < d.threads[j].TID
	})
	return d
}

// sortFunctions orders by the chosen column, then by the other, then by
// name, so equal rows do not swap places between refreshes.
func sortFunctions(fs []profile.FunctionStat, bySelf bool) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		ka, kb, la, lb := a.Total, b.Total, a.Self, b.Self
		if bySelf {
			ka, kb, la, lb = la, lb, ka, kb
		}
		if ka != kb {
			return ka > kb
		}
		if la != lb {
			return la > lb
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Module < b.Module
	})
}

// contains is a case-insensitive substring test; needle is lower case.
func contains(s, needle string) bool {
	return strings.Contains(strings.ToLower(s), needle)
}

func stackMatches(frames []profile.Frame, needle string) bool {
	for _, f := range frames {
		if contains(f.Name(), needle) || contains(f.Module, needle) {
			return true
		}
	}
	return false
}

// childPath names a tree node by the names of its ancestors, so fold state
// and the cursor survive refreshes that rebuild every *Node.
func childPath(parent string, n *profile.Node) string {
	return parent + "\x1e" + n.Name + "\x1f" + n.Module
}

// treeRow is one visible line of the call tree.
type treeRow struct {
	path   string
	parent int // index of the parent row, -1 at the top level
	depth  int
	node   *profile.Node
	open   bool
}

// flattenTree lists the visible rows: a node's children are shown when it
// is open, explicitly (open[path]) or by default on the hottest path.
func flattenTree(root *profile.Node, open map[string]bool, hot map[string]bool) []treeRow {
	var rows []treeRow
	var walk func(n *profile.Node, path string, parent, depth int)
	walk = func(n *profile.Node, path string, parent, depth int) {
		for _, c := range n.Children {
			p := childPath(path, c)
			isOpen, set := open[p]
			if !set {
				isOpen = hot[p]
			}
			isOpen = isOpen && len(c.Children) > 0
			rows = append(rows, treeRow{path: p, parent: parent, depth: depth, node: c, open: isOpen})
			if isOpen {
				walk(c, p, len(rows)-1, depth+1)
			}
		}
	}
	if root != nil {
		walk(root, "", -1, 0)
	}
	return rows
}
