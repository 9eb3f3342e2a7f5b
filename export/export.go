package export

import (
	"fmt"
	"io"
	"strings"

	"codeberg.org/stacktop/stacktop/profile"
)

// Format is an output file format.
type Format int

const (
	FormatPprof Format = iota + 1
	FormatFolded
	FormatSpeedscope
	FormatSVG
)

var formatNames = map[string]Format{
	"pprof":      FormatPprof,
	"folded":     FormatFolded,
	"speedscope": FormatSpeedscope,
	"svg":        FormatSVG,
	"flamegraph": FormatSVG,
}

func (f Format) String() string {
	switch f {
	case FormatPprof:
		return "pprof"
	case FormatFolded:
		return "folded"
	case FormatSpeedscope:
		return "speedscope"
	case FormatSVG:
		return "svg"
	}
	return fmt.Sprintf("format(%d)", int(f))
}

// ParseFormat maps a --format value to a Format.
func ParseFormat(name string) (Format, error) {
	if f, ok := formatNames[strings.ToLower(name)]; ok {
		return f, nil
	}
	return 0, fmt.Errorf("unknown format %q (want pprof, folded, speedscope or svg)", name)
}

// FormatFromPath picks a format from an output file's name.
func FormatFromPath(path string) (Format, bool) {
	p := strings.ToLower(path)
	switch {
	case strings.HasSuffix(p, ".pb.gz"), strings.HasSuffix(p, ".pprof"), strings.HasSuffix(p, ".pb"):
		return FormatPprof, true
	case strings.HasSuffix(p, ".folded"), strings.HasSuffix(p, ".collapsed"), strings.HasSuffix(p, ".txt"):
		return FormatFolded, true
	case strings.HasSuffix(p, ".speedscope.json"), strings.HasSuffix(p, ".json"):
		return FormatSpeedscope, true
	case strings.HasSuffix(p, ".svg"):
		return FormatSVG, true
	}
	return 0, false
}

// Options are the choices record offers for every format.
type Options struct {
	// Threads puts a root frame "NAME TID" above every stack (folded,
	// svg, speedscope), so each thread is its own tower. pprof always
	// carries the thread, thread_name and pid labels instead.
	Threads bool
	// Lines names folded frames "func (file:line)" where the line is known.
	Lines bool
}

// WriteOptions writes p to w in format f with opt.
func WriteOptions(w io.Writer, p *profile.Profile, f Format, opt Options) error {
	if opt.Threads && f != FormatPprof {
		p = ThreadRooted(p)
	}
	switch f {
	case FormatPprof:
		return WritePprof(w, p)
	case FormatFolded:
		return WriteFolded(w, p, FoldedOptions{Lines: opt.Lines})
	case FormatSpeedscope:
		return WriteSpeedscope(w, p)
	case FormatSVG:
		return WriteFlameGraph(w, p, FlameGraphOptions{})
	}
	return fmt.Errorf("export: unknown format %v", f)
}
