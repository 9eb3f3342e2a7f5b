package otlp

import (
	"crypto/rand"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	profpb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"
	respb "go.opentelemetry.io/proto/slim/otlp/resource/v1"

	"codeberg.org/stacktop/stacktop/profile"
)

// Semantic-convention attribute names stacktop sets.
const (
	AttrHostName       = "host.name"
	AttrServiceName    = "service.name"
	AttrPID            = "process.pid"
	AttrExecutablePath = "process.executable.path"
	AttrExecutableName = "process.executable.name"
	AttrCommand        = "process.command"
	AttrCommandArgs    = "process.command_args"
	AttrThreadID       = "thread.id"
	AttrThreadName     = "thread.name"
	// AttrThreadState is the thread's scheduling state at a wall-clock
	// sample (profile.ThreadState: running, sleeping, disk wait,
	// stopped); OpenTelemetry has no convention for it yet.
	AttrThreadState = "thread.state"
	AttrBuildIDGNU  = "process.executable.build_id.gnu"
)

// ScopeName is the instrumentation scope of stacktop's profiles.
const ScopeName = "stacktop"

// Resource describes the profiled process and its host.
type Resource struct {
	HostName       string
	ServiceName    string // "" gives unknown_service:EXECUTABLE, as the specification asks
	PID            int
	ExecutablePath string
	CommandArgs    []string // argv; process.command is argv[0]
	// Extra holds further attributes (OTEL_RESOURCE_ATTRIBUTES); they
	// never replace the ones above.
	Extra map[string]string
}

// attributes returns the resource's attributes in a stable order.
func (r Resource) attributes() []*commonpb.KeyValue {
	var kv []*commonpb.KeyValue
	add := func(k string, v *commonpb.AnyValue) { kv = append(kv, &commonpb.KeyValue{Key: k, Value: v}) }
	service := r.ServiceName
	if service == "" {
		service = "unknown_service"
		if r.ExecutablePath != "" {
			service += ":" + filepath.Base(r.ExecutablePath)
		}
	}
	add(AttrServiceName, str(service))
	if r.HostName != "" {
		add(AttrHostName, str(r.HostName))
	}
	if r.PID > 0 {
		add(AttrPID, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(r.PID)}})
	}
	if r.ExecutablePath != "" {
		add(AttrExecutablePath, str(r.ExecutablePath))
		add(AttrExecutableName, str(filepath.Base(r.ExecutablePath)))
	}
	if len(r.CommandArgs) > 0 {
		add(AttrCommand, str(r.CommandArgs[0]))
		vals := make([]*commonpb.AnyValue, len(r.CommandArgs))
		for i, a := range r.CommandArgs {
			vals[i] = str(a)
		}
		add(AttrCommandArgs, &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}})
	}
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if hasKey(kv, k) {
			continue
		}
		add(k, str(r.Extra[k]))
	}
	return kv
}

func hasKey(kv []*commonpb.KeyValue, k string) bool {
	for _, e := range kv {
		if e.Key == k {
			return true
		}
	}
	return false
}

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

// Sample types: one value per sample, the number of samples, over a
// period of CPU nanoseconds (wall nanoseconds for a wall-clock profile:
// Profile.Wall, record --idle), as in stacktop's pprof output.
const (
	sampleType = "samples"
	sampleUnit = "count"
	periodUnit = "nanoseconds"
)

// periodType names the clock p's period runs on.
func periodType(p *profile.Profile) string {
	if p.Wall {
		return "wall"
	}
	return "cpu"
}

// dict builds a ProfilesDictionary: every table starts with its zero
// entry, as the specification requires, and entries are interned.
type dict struct {
	d         *profpb.ProfilesDictionary
	strings   map[string]int32
	attrs     map[attrKey]int32
	functions map[[3]int32]int32
	mappings  map[mappingKey]int32
	locations map[locationKey]int32
	stacks    map[string]int32
}

type attrKey struct {
	key   int32
	value string
	isInt bool
}

type mappingKey struct {
	file         string
	start, limit uint64
}

type locationKey struct {
	pc     uint64
	module string
	lines  string // the inline chain's function indices and lines
}

func newDict() *dict {
	return &dict{
		d: &profpb.ProfilesDictionary{
			MappingTable:   []*profpb.Mapping{{}},
			LocationTable:  []*profpb.Location{{}},
			FunctionTable:  []*profpb.Function{{}},
			LinkTable:      []*profpb.Link{{TraceId: make([]byte, 16), SpanId: make([]byte, 8)}},
			StringTable:    []string{""},
			AttributeTable: []*profpb.KeyValueAndUnit{{}},
			StackTable:     []*profpb.Stack{{}},
		},
		strings:   map[string]int32{"": 0},
		attrs:     map[attrKey]int32{},
		functions: map[[3]int32]int32{},
		mappings:  map[mappingKey]int32{},
		locations: map[locationKey]int32{},
		stacks:    map[string]int32{},
	}
}

func (d *dict) str(s string) int32 {
	if i, ok := d.strings[s]; ok {
		return i
	}
	i := int32(len(d.d.StringTable))
	d.d.StringTable = append(d.d.StringTable, s)
	d.strings[s] = i
	return i
}

func (d *dict) attrStr(key, value string) int32 {
	k := attrKey{key: d.str(key), value: value}
	if i, ok := d.attrs[k]; ok {
		return i
	}
	i := int32(len(d.d.AttributeTable))
	d.d.AttributeTable = append(d.d.AttributeTable, &profpb.KeyValueAndUnit{KeyStrindex: k.key, Value: str(value)})
	d.attrs[k] = i
	return i
}

func (d *dict) attrInt(key string, value int64) int32 {
	k := attrKey{key: d.str(key), value: strconv.FormatInt(value, 10), isInt: true}
	if i, ok := d.attrs[k]; ok {
		return i
	}
	i := int32(len(d.d.AttributeTable))
	d.d.AttributeTable = append(d.d.AttributeTable, &profpb.KeyValueAndUnit{
		KeyStrindex: k.key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: value}},
	})
	d.attrs[k] = i
	return i
}

func (d *dict) function(f profile.Frame) int32 {
	name := d.str(f.Name())
	k := [3]int32{name, name, d.str(f.File)}
	if i, ok := d.functions[k]; ok {
		return i
	}
	i := int32(len(d.d.FunctionTable))
	d.d.FunctionTable = append(d.d.FunctionTable, &profpb.Function{NameStrindex: k[0], SystemNameStrindex: k[1], FilenameStrindex: k[2]})
	d.functions[k] = i
	return i
}

func (d *dict) mapping(f profile.Frame) int32 {
	if f.Module == "" {
		return 0
	}
	k := mappingKey{f.Module, f.MapStart, f.MapLimit}
	if i, ok := d.mappings[k]; ok {
		return i
	}
	m := &profpb.Mapping{MemoryStart: f.MapStart, MemoryLimit: f.MapLimit, FileOffset: f.MapOffset, FilenameStrindex: d.str(f.Module)}
	if f.BuildID != "" {
		m.AttributeIndices = []int32{d.attrStr(AttrBuildIDGNU, f.BuildID)}
	}
	i := int32(len(d.d.MappingTable))
	d.d.MappingTable = append(d.d.MappingTable, m)
	d.mappings[k] = i
	return i
}

// stack interns a leaf-first frame list; frames inlined at one PC share a
// Location whose Lines run innermost first, the caller last, as in pprof.
// A frame stacktop could not name is a Location with its address and
// mapping (file, offset, build ID) and no Line, for a back end that has
// the debug file to name it, as the OpenTelemetry eBPF profiler sends
// native frames.
func (d *dict) stack(frames []profile.Frame) int32 {
	var locs []int32
	var lines []*profpb.Line
	var key []byte
	for i, f := range frames {
		if f.Function != "" {
			lines = append(lines, &profpb.Line{FunctionIndex: d.function(f), Line: int64(f.Line)})
		}
		if f.Inlined && i+1 < len(frames) {
			continue
		}
		lk := locationKey{pc: f.PC, module: f.Module}
		var lb []byte
		for _, l := range lines {
			lb = strconv.AppendInt(lb, int64(l.FunctionIndex), 10)
			lb = append(lb, ':')
			lb = strconv.AppendInt(lb, l.Line, 10)
			lb = append(lb, ',')
		}
		lk.lines = string(lb)
		li, ok := d.locations[lk]
		if !ok {
			li = int32(len(d.d.LocationTable))
			d.d.LocationTable = append(d.d.LocationTable, &profpb.Location{MappingIndex: d.mapping(f), Address: f.PC, Lines: lines})
			d.locations[lk] = li
		}
		locs = append(locs, li)
		key = strconv.AppendInt(key, int64(li), 10)
		key = append(key, ',')
		lines = nil
	}
	if si, ok := d.stacks[string(key)]; ok {
		return si
	}
	si := int32(len(d.d.StackTable))
	d.d.StackTable = append(d.d.StackTable, &profpb.Stack{LocationIndices: locs})
	d.stacks[string(key)] = si
	return si
}

// Build converts p (a snapshot or a window; see package fleet) into one
// export request holding one profile: one sample per (thread, stack),
// valued in samples, with the thread's id and name as attributes.
func Build(p *profile.Profile, res Resource) *collpb.ExportProfilesServiceRequest {
	d := newDict()
	period := p.Period.Nanoseconds()
	prof := &profpb.Profile{
		SampleType:   &profpb.ValueType{TypeStrindex: d.str(sampleType), UnitStrindex: d.str(sampleUnit)},
		PeriodType:   &profpb.ValueType{TypeStrindex: d.str(periodType(p)), UnitStrindex: d.str(periodUnit)},
		Period:       period,
		TimeUnixNano: uint64(p.Start.UnixNano()),
		DurationNano: uint64(p.Duration().Nanoseconds()),
		ProfileId:    newProfileID(),
	}
	agg := p.Aggregate(0)
	tids := make([]int, 0, len(agg.ThreadStacks))
	for tid := range agg.ThreadStacks {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	stackIdx := make([]int32, len(agg.Stacks))
	for _, tid := range tids {
		name := ""
		if th := p.Threads[tid]; th != nil {
			name = th.Name
		}
		attrs := []int32{d.attrInt(AttrThreadID, int64(tid))}
		if name != "" {
			attrs = append(attrs, d.attrStr(AttrThreadName, name))
		}
		stacks := agg.ThreadStacks[tid]
		ids := make([]int32, 0, len(stacks))
		for id := range stacks {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			n := stacks[id]
			if n == 0 {
				continue
			}
			if stackIdx[id] == 0 {
				stackIdx[id] = d.stack(agg.Stacks[id])
			}
			sattrs := attrs
			if st := p.StackState(id); st != profile.StateUnknown {
				sattrs = append(slices.Clip(attrs), d.attrStr(AttrThreadState, st.String()))
			}
			prof.Samples = append(prof.Samples, &profpb.Sample{
				StackIndex:       stackIdx[id],
				AttributeIndices: sattrs,
				Values:           []int64{n},
			})
		}
	}
	return &collpb.ExportProfilesServiceRequest{
		ResourceProfiles: []*profpb.ResourceProfiles{{
			Resource: &respb.Resource{Attributes: res.attributes()},
			ScopeProfiles: []*profpb.ScopeProfiles{{
				Scope:    &commonpb.InstrumentationScope{Name: ScopeName},
				Profiles: []*profpb.Profile{prof},
			}},
		}},
		Dictionary: d.d,
	}
}

func newProfileID() []byte {
	id := make([]byte, 16)
	rand.Read(id)
	id[0] |= 1 // never the invalid all-zero ID
	return id
}
