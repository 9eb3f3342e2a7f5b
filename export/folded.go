package export

import (
	"bufio"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"codeberg.org/stacktop/stacktop/profile"
)

// FoldedOptions tune the folded output.
type FoldedOptions struct {
	// ThreadRoot puts "NAME TID" as the outermost frame of every stack, so
	// a flame graph splits by thread (see ThreadRooted).
	ThreadRoot bool
	// Lines writes each frame whose line is known as "func (file:line)",
	// file being the source file's base name, as py-spy does: one frame
	// per call site instead of per function.
	Lines bool
}

// foldFrame is f's name in folded output.
func foldFrame(f profile.Frame, lines bool) string {
	if lines && f.File != "" && f.Line > 0 {
		return foldName(f.Name() + " (" + filepath.Base(f.File) + ":" + strconv.Itoa(f.Line) + ")")
	}
	return foldName(f.Name())
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
			root = foldName(threadRootName(name, tid))
		}
		for id, n := range stacks {
			frames := agg.Stacks[id]
			parts = parts[:0]
			if root != "" {
				parts = append(parts, root)
			}
			for i := len(frames) - 1; i >= 0; i-- {
				parts = append(parts, foldFrame(frames[i], opt.Lines))
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
