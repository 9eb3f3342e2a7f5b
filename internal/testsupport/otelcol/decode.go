package otelcol

import (
	"strconv"
	"strings"

	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	profpb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"
)

// The Collector re-encodes what it received: it may move attribute keys
// and string values into the dictionary's string table (key_strindex,
// string_value_strindex). These helpers read either form, with bounds
// checks, since what a test reads back is data, not a promise.

func str(d *profpb.ProfilesDictionary, i int32) string {
	if i < 0 || int(i) >= len(d.GetStringTable()) {
		return "<bad string index " + strconv.Itoa(int(i)) + ">"
	}
	return d.GetStringTable()[i]
}

// Value renders an attribute value as text.
func Value(d *profpb.ProfilesDictionary, v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_StringValueStrindex:
		return str(d, x.StringValueStrindex)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, Value(d, e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return ""
}

// ResourceAttributes returns the attributes of each resource received.
func ResourceAttributes(pd *profpb.ProfilesData) []map[string]string {
	var out []map[string]string
	d := pd.GetDictionary()
	for _, rp := range pd.GetResourceProfiles() {
		m := map[string]string{}
		for _, kv := range rp.GetResource().GetAttributes() {
			k := kv.GetKey()
			if k == "" {
				k = str(d, kv.GetKeyStrindex())
			}
			m[k] = Value(d, kv.GetValue())
		}
		out = append(out, m)
	}
	return out
}

// attr returns the value of the attribute key among the indices.
func attr(d *profpb.ProfilesDictionary, indices []int32, key string) string {
	for _, ai := range indices {
		if ai < 0 || int(ai) >= len(d.GetAttributeTable()) {
			continue
		}
		a := d.GetAttributeTable()[ai]
		if str(d, a.GetKeyStrindex()) == key {
			return Value(d, a.GetValue())
		}
	}
	return ""
}

// Folded sums the samples received into "TID;outermost;...;leaf" ->
// total value, function names read through the dictionary.
func Folded(got []*profpb.ProfilesData) map[string]int64 {
	out := map[string]int64{}
	for _, pd := range got {
		d := pd.GetDictionary()
		for _, rp := range pd.GetResourceProfiles() {
			for _, sp := range rp.GetScopeProfiles() {
				for _, pr := range sp.GetProfiles() {
					for _, smp := range pr.GetSamples() {
						tid := attr(d, smp.GetAttributeIndices(), "thread.id")
						var names []string
						si := smp.GetStackIndex()
						if si < 0 || int(si) >= len(d.GetStackTable()) {
							continue
						}
						for _, li := range d.GetStackTable()[si].GetLocationIndices() {
							if li < 0 || int(li) >= len(d.GetLocationTable()) {
								continue
							}
							for _, l := range d.GetLocationTable()[li].GetLines() {
								fi := l.GetFunctionIndex()
								if fi < 0 || int(fi) >= len(d.GetFunctionTable()) {
									continue
								}
								names = append(names, str(d, d.GetFunctionTable()[fi].GetNameStrindex()))
							}
						}
						for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
							names[i], names[j] = names[j], names[i]
						}
						var sum int64
						for _, v := range smp.GetValues() {
							sum += v
						}
						out[tid+";"+strings.Join(names, ";")] += sum
					}
				}
			}
		}
	}
	return out
}

// MappingBuildIDs lists the GNU build IDs of the mappings received.
func MappingBuildIDs(pd *profpb.ProfilesData) map[string]string {
	d := pd.GetDictionary()
	out := map[string]string{}
	for i, m := range d.GetMappingTable() {
		if i == 0 {
			continue
		}
		if id := attr(d, m.GetAttributeIndices(), "process.executable.build_id.gnu"); id != "" {
			out[str(d, m.GetFilenameStrindex())] = id
		}
	}
	return out
}
