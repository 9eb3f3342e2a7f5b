package export

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"

	"stacktop/profile"
)

// FoldedOptions tune the folded output.
type FoldedOptions struct {
	// ThreadRoot puts "name-tid" as the outermost frame of every stack, so a
	// flame graph splits by thread.
	ThreadRoot bool
}

// foldName makes a frame name safe for the folded format, in which ';'
// separates frames and the last space separates the count.
func foldName(s string) string {
	return strings.NewReplacer(";", ":", "\n", " ").Replace(s)
}

// WriteFolded writes one line per distinct stack, "root;...;leaf COUNT",
// sorted so the output is deterministic.
func WriteFolded(w io.Writer, p *profile.Profile, opt FoldedOptions) error {
	agg := p.Aggregate(0)
	counts := map[string]int64{}
	var parts []string
	for tid, stacks := range agg.ThreadStacks {
		root := ""
		if opt.ThreadRoot {
			name := "thread"
			if th := p.Threads[tid]; th != nil && th.Name != "" {
				name = th.Name
			}
			root = foldName(name) + "-" + strconv.Itoa(tid)
		}
		for id, n := range stacks {
			frames := agg.Stacks[id]
			parts = parts[:0]
			if root != "" {
				parts = append(parts, root)
			}
			for i := len(frames) - 1; i >= 0; i-- {
				parts = append(parts, foldName(frames[i].Name()))
			}
			counts[strings.Join(parts, ";")] += n
		}
	}
	lines := make([]string, 0, len(counts))
	for k := range counts {
		lines = append(lines, k)
	}
	sort.Strings(lines)
	bw := bufio.NewWriter(w)
	for _, k := range lines {
		bw.WriteString(k)
		bw.WriteByte(' ')
		bw.WriteString(strconv.FormatInt(counts[k], 10))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
