package export

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/profile"
)

// The readers turn a saved profile back into a profile.Profile, for
// stacktop convert: a pprof file (stacktop's or any other tool's) or
// folded stacks. What a format does not hold stays empty: folded stacks
// have names only (no addresses, modules or threads), pprof has no time
// line (every sample is at the profile's start). speedscope and SVG
// files are outputs only.

// maxSampleValue bounds one pprof sample's count: a stacktop sample is
// stored in 31-bit parts, and a crafted count near 2^62 would make 2^31
// of them.
const maxSampleValue = 1 << 40

// maxProfileSize bounds what a reader takes in: a profile bigger than
// this is not one of stacktop's (record's are a few MB).
const maxProfileSize = 1 << 30

// ReadError says where an input profile is malformed.
type ReadError struct {
	Format Format
	Line   int // 1-based, folded only
	Msg    string
}

func (e *ReadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("export: %v line %d: %s", e.Format, e.Line, e.Msg)
	}
	return fmt.Sprintf("export: %v: %s", e.Format, e.Msg)
}

// Read reads a profile in any format Read knows, telling which by its
// first bytes: gzip or protobuf is pprof, text is folded.
func Read(r io.Reader) (*profile.Profile, Format, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxProfileSize+1))
	if err != nil {
		return nil, 0, err
	}
	if len(b) > maxProfileSize {
		return nil, 0, fmt.Errorf("export: input larger than %d bytes", maxProfileSize)
	}
	if looksFolded(b) {
		p, err := ReadFolded(bytes.NewReader(b))
		return p, FormatFolded, err
	}
	p, err := ReadPprof(b)
	return p, FormatPprof, err
}

// looksFolded reports whether b starts as text: no gzip magic, no
// protobuf tag byte, printable up to the first newline.
func looksFolded(b []byte) bool {
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		return false
	}
	// An uncompressed pprof starts with 0x0a, a newline (field 1, its
	// sample types): look at the first line that is not empty, which in
	// a protobuf holds a control byte soon.
	text := bytes.TrimLeft(b, "\n")
	line := text[:min(len(text), 4096)]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	for _, c := range line {
		if c < 0x20 && c != '\t' && c != '\r' {
			return false
		}
	}
	return len(text) > 0
}

// ReadFolded reads folded stacks, "root;...;leaf COUNT" a line, into a
// profile whose frames have names only. Empty lines are skipped; any other
// line that is not a stack and a positive count is an error naming it.
func ReadFolded(r io.Reader) (*profile.Profile, error) {
	p := profile.New(0, "", time.Unix(0, 0), 0)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var frames []profile.Frame
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		i := strings.LastIndexByte(text, ' ')
		if i <= 0 {
			return nil, &ReadError{FormatFolded, line, "want STACK COUNT"}
		}
		n, err := strconv.ParseInt(text[i+1:], 10, 64)
		if err != nil || n <= 0 || n > 1<<31-1 {
			return nil, &ReadError{FormatFolded, line, fmt.Sprintf("count %q: want a positive integer below 2^31", truncateText(text[i+1:]))}
		}
		names := strings.Split(text[:i], ";")
		frames = frames[:0]
		for j := len(names) - 1; j >= 0; j-- { // leaf first
			if names[j] == "" {
				return nil, &ReadError{FormatFolded, line, "an empty frame name"}
			}
			frames = append(frames, profile.Frame{Function: names[j]})
		}
		p.Add(profile.Sample{Time: p.Start, Frames: frames, Weight: n})
	}
	if err := sc.Err(); err != nil {
		return nil, &ReadError{FormatFolded, 0, err.Error()}
	}
	return p, nil
}

func truncateText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// ReadPprof reads a pprof profile (gzipped or not). Each sample counts
// its "samples" value where the profile has one, else its default
// value; a location without lines is a frame with an address and module
// but no name, as stacktop writes frames it could not name. The labels
// stacktop writes (pid, thread, thread_name) give the threads back.
func ReadPprof(b []byte) (p *profile.Profile, err error) {
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, &ReadError{FormatPprof, 0, err.Error()}
		}
		if b, err = io.ReadAll(io.LimitReader(zr, maxProfileSize+1)); err != nil {
			return nil, &ReadError{FormatPprof, 0, err.Error()}
		}
		if len(b) > maxProfileSize {
			return nil, &ReadError{FormatPprof, 0, fmt.Sprintf("more than %d bytes inflated", maxProfileSize)}
		}
	}
	defer func() { // the decoder is not ours: a panic is a bad file
		if r := recover(); r != nil {
			p, err = nil, &ReadError{FormatPprof, 0, fmt.Sprintf("decoder panicked: %v", r)}
		}
	}()
	in, err := pprof.ParseData(b)
	if err != nil {
		return nil, &ReadError{FormatPprof, 0, err.Error()}
	}
	return fromPprof(in)
}

// fromPprof converts a parsed pprof profile.
func fromPprof(in *pprof.Profile) (*profile.Profile, error) {
	value, ok := pprofValueIndex(in)
	if !ok {
		return nil, &ReadError{FormatPprof, 0, "no sample types"}
	}
	p := profile.New(0, "", time.Unix(0, in.TimeNanos), time.Duration(in.Period))
	if in.PeriodType != nil {
		p.Wall = in.PeriodType.Type == "wall"
		if in.PeriodType.Unit != "nanoseconds" {
			p.Period = 0 // a period in other units is not a time
		}
	}
	for _, c := range in.Comments {
		if rest, ok := strings.CutPrefix(c, "stacktop: pid "); ok {
			if pid, cmd, ok := strings.Cut(rest, ": "); ok {
				p.PID, _ = strconv.Atoi(pid)
				p.Command = cmd
			}
		}
	}
	var frames []profile.Frame
	for _, s := range in.Sample {
		if len(s.Value) <= value || s.Value[value] <= 0 {
			continue
		}
		if s.Value[value] > maxSampleValue {
			return nil, &ReadError{FormatPprof, 0, fmt.Sprintf("a sample of %d, more than %d", s.Value[value], int64(maxSampleValue))}
		}
		frames = frames[:0]
		for _, loc := range s.Location {
			frames = appendLocation(frames, loc)
		}
		tid := 0
		if v := s.NumLabel["thread"]; len(v) == 1 {
			tid = int(v[0])
		}
		name := ""
		if v := s.Label["thread_name"]; len(v) == 1 {
			name = v[0]
		}
		if v := s.NumLabel["pid"]; len(v) == 1 && p.PID == 0 {
			p.PID = int(v[0])
		}
		var state profile.ThreadState
		if v := s.Label["thread_state"]; len(v) == 1 {
			state = stateNamed(v[0])
		}
		truncated := len(s.Label["truncated"]) == 1 && s.Label["truncated"][0] == "true"
		for w := s.Value[value]; w > 0; w -= 1<<31 - 1 { // Add keeps weights in 31 bits per event
			p.Add(profile.Sample{TID: tid, ThreadName: name, Time: p.Start, Frames: frames, Weight: min(w, 1<<31-1),
				State: state, Truncated: truncated})
		}
	}
	return p, nil
}

// stateNamed is the state a thread_state label names.
func stateNamed(name string) profile.ThreadState {
	for s := profile.StateRunning; s <= profile.StateStopped; s++ {
		if s.String() == name {
			return s
		}
	}
	return profile.StateUnknown
}

// pprofValueIndex picks the value a sample counts: "samples", else the
// default sample type, else the last.
func pprofValueIndex(in *pprof.Profile) (int, bool) {
	if len(in.SampleType) == 0 {
		return 0, false
	}
	for i, st := range in.SampleType {
		if st.Type == "samples" {
			return i, true
		}
	}
	for i, st := range in.SampleType {
		if st.Type == in.DefaultSampleType {
			return i, true
		}
	}
	return len(in.SampleType) - 1, true
}

// appendLocation appends loc's frames, innermost first: one per line
// (inlined calls first), or one without a name if loc has no lines.
func appendLocation(frames []profile.Frame, loc *pprof.Location) []profile.Frame {
	base := profile.Frame{PC: loc.Address}
	if m := loc.Mapping; m != nil {
		base.Module, base.BuildID = m.File, m.BuildID
		base.MapStart, base.MapLimit, base.MapOffset = m.Start, m.Limit, m.Offset
		if loc.Address >= m.Start {
			base.Offset = loc.Address - m.Start + m.Offset
		}
	}
	if len(loc.Line) == 0 {
		return append(frames, base)
	}
	for i, l := range loc.Line {
		f := base
		if l.Function != nil {
			f.Function, f.File = l.Function.Name, l.Function.Filename
		}
		f.Line = int(l.Line)
		f.Inlined = i < len(loc.Line)-1
		frames = append(frames, f)
	}
	return frames
}
