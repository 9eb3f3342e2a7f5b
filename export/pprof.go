package export

import (
	"io"
	"strconv"

	pprof "github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/profile"
)

// WritePprof writes a gzipped pprof protobuf. Each distinct (thread, stack)
// becomes one pprof sample labelled with the thread id and name; frames
// inlined into the same PC share one Location with several Lines, innermost
// first, as pprof expects.
func WritePprof(w io.Writer, p *profile.Profile) error {
	return BuildPprof(p).Write(w)
}

// BuildPprof converts a profile to pprof's in-memory form. Its sample
// types are samples/count and, for an on-CPU profile, cpu/nanoseconds (the
// default), for a wall-clock one (Profile.Wall) wall/nanoseconds.
func BuildPprof(p *profile.Profile) *pprof.Profile {
	period := p.Period.Nanoseconds()
	// On-CPU samples weigh the CPU time their thread used, in periods, so
	// samples x period is CPU time; under --idle every thread counts at
	// every tick, which is wall-clock time.
	clock := "cpu"
	if p.Wall {
		clock = "wall"
	}
	out := &pprof.Profile{
		SampleType: []*pprof.ValueType{
			{Type: "samples", Unit: "count"},
			{Type: clock, Unit: "nanoseconds"},
		},
		DefaultSampleType: clock,
		PeriodType:        &pprof.ValueType{Type: clock, Unit: "nanoseconds"},
		Period:            period,
		TimeNanos:         p.Start.UnixNano(),
		DurationNanos:     p.Duration().Nanoseconds(),
	}
	if p.Command != "" {
		out.Comments = []string{"stacktop: pid " + strconv.Itoa(p.PID) + ": " + p.Command}
	}

	type mapKey struct {
		file         string
		start, limit uint64
	}
	mappings := map[mapKey]*pprof.Mapping{}
	functions := map[[2]string]*pprof.Function{}
	// A location is one PC of one module; frames without an address
	// (read from folded stacks) are told apart by their names instead.
	type locKey struct {
		pc           uint64
		module, name string
	}
	locations := map[locKey]*pprof.Location{}

	mappingFor := func(f profile.Frame) *pprof.Mapping {
		if f.Module == "" {
			return nil
		}
		k := mapKey{f.Module, f.MapStart, f.MapLimit}
		m := mappings[k]
		if m == nil {
			// The Has* flags start true and each location that lacks
			// what one says clears it (see below).
			m = &pprof.Mapping{
				ID: uint64(len(out.Mapping) + 1), Start: f.MapStart, Limit: f.MapLimit,
				Offset: f.MapOffset, File: f.Module, BuildID: f.BuildID,
				HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true,
			}
			mappings[k] = m
			out.Mapping = append(out.Mapping, m)
		}
		return m
	}
	functionFor := func(f profile.Frame) *pprof.Function {
		k := [2]string{f.Name(), f.File}
		fn := functions[k]
		if fn == nil {
			fn = &pprof.Function{ID: uint64(len(out.Function) + 1), Name: k[0], SystemName: k[0], Filename: f.File}
			functions[k] = fn
			out.Function = append(out.Function, fn)
		}
		return fn
	}

	// symbolized clears the flags of loc's mapping that loc belies. A flag
	// says what every location of the mapping has, so that pprof's
	// symbolizer (which leaves a mapping with any flag set alone) names a
	// mapping where some frames were left unnamed. Lines come from DWARF,
	// which gives the inlined frames with them.
	symbolized := func(loc *pprof.Location) {
		m := loc.Mapping
		if m == nil {
			return
		}
		if len(loc.Line) == 0 {
			m.HasFunctions, m.HasFilenames, m.HasLineNumbers, m.HasInlineFrames = false, false, false, false
			return
		}
		for _, l := range loc.Line {
			if l.Function.Filename == "" {
				m.HasFilenames = false
			}
			if l.Line == 0 {
				m.HasLineNumbers, m.HasInlineFrames = false, false
			}
		}
	}

	// locationsOf turns a leaf-first frame list into pprof locations,
	// folding inlined frames into the location of the PC they share. A
	// frame stacktop could not name is a location with its address and
	// mapping and no line: pprof, or a back end with the debug file,
	// names it later (text outputs show "module+0xoff" instead).
	locationsOf := func(frames []profile.Frame) []*pprof.Location {
		var locs []*pprof.Location
		var lines []pprof.Line
		for i, f := range frames {
			if f.Function != "" {
				lines = append(lines, pprof.Line{Function: functionFor(f), Line: int64(f.Line)})
			}
			if f.Inlined && i+1 < len(frames) {
				continue // the outer frame at the same PC closes the location
			}
			k := locKey{pc: f.PC, module: f.Module}
			if f.PC == 0 {
				for _, l := range lines {
					k.name += l.Function.Name + "\x00" + strconv.FormatInt(l.Line, 10) + "\x00"
				}
			}
			loc := locations[k]
			if loc == nil {
				loc = &pprof.Location{ID: uint64(len(out.Location) + 1), Mapping: mappingFor(f), Address: f.PC, Line: lines}
				locations[k] = loc
				out.Location = append(out.Location, loc)
				symbolized(loc)
			}
			locs = append(locs, loc)
			lines = nil
		}
		return locs
	}

	agg := p.Aggregate(0)
	stackLocs := make([][]*pprof.Location, len(agg.Stacks))
	for tid, stacks := range agg.ThreadStacks {
		name, pid := "", p.PID
		if th := p.Threads[tid]; th != nil {
			name = th.Name
			if th.PID != 0 {
				pid = th.PID
			}
		}
		for id, n := range stacks {
			if stackLocs[id] == nil {
				stackLocs[id] = locationsOf(agg.Stacks[id])
			}
			s := &pprof.Sample{
				Location: stackLocs[id],
				Value:    []int64{n, n * period},
				Label:    map[string][]string{"thread_name": {name}},
				NumLabel: map[string][]int64{"thread": {int64(tid)}, "pid": {int64(pid)}},
			}
			kind := p.StackKind(id)
			if kind.State != profile.StateUnknown {
				s.Label["thread_state"] = []string{kind.State.String()}
			}
			if kind.Truncated {
				s.Label["truncated"] = []string{"true"} // the walk stopped short of the outermost frame
			}
			out.Sample = append(out.Sample, s)
		}
	}
	return out
}
