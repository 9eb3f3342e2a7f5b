package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// stackSpec is one sample of a hand-built profile: a thread and its frames,
// root first as people write them ("main;a;hot").
type stackSpec struct {
	tid    int
	folded string
}

// profileOf builds a profile whose events follow specs in order, one
// sample each, 10ms apart.
func profileOf(specs ...stackSpec) *profile.Profile {
	start := time.Unix(1700000000, 0)
	p := profile.New(7, "spec", start, 10*time.Millisecond)
	for i, s := range specs {
		names := strings.Split(s.folded, ";")
		frames := make([]profile.Frame, len(names))
		for j, n := range names {
			frames[len(names)-1-j] = profile.Frame{PC: uint64(0x1000 + 16*j), Function: n, Module: "/bin/spec"}
		}
		p.Add(profile.Sample{TID: s.tid, ThreadName: fmt.Sprintf("t%d", s.tid), Time: start.Add(time.Duration(i) * 10 * time.Millisecond), Frames: frames})
	}
	return p
}

// ssFile is what the checker extracts from a speedscope file it accepted.
type ssFile struct {
	frames   []string
	profiles []ssProfile
	active   int
}

type ssProfile struct {
	name     string
	end      float64
	samples  [][]int // frame indices, root first
	weights  []float64
	typeName string
	unit     string
}

// checkSpeedscope is an independent checker of the speedscope file format
// (https://www.speedscope.app/file-format-schema.json): it decodes the JSON
// generically and verifies the required keys, their types and every index.
func checkSpeedscope(t *testing.T, data []byte) ssFile {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	var out ssFile
	if s, _ := doc["$schema"].(string); s != "https://www.speedscope.app/file-format-schema.json" {
		t.Fatalf("$schema = %v", doc["$schema"])
	}
	shared, ok := doc["shared"].(map[string]any)
	if !ok {
		t.Fatalf("shared is %T, want object", doc["shared"])
	}
	frames, ok := shared["frames"].([]any)
	if !ok {
		t.Fatalf("shared.frames is %T, want array", shared["frames"])
	}
	for i, f := range frames {
		fo, ok := f.(map[string]any)
		if !ok {
			t.Fatalf("frame %d is %T", i, f)
		}
		name, ok := fo["name"].(string)
		if !ok {
			t.Fatalf("frame %d: name is %T", i, fo["name"])
		}
		if v, ok := fo["file"]; ok {
			if _, ok := v.(string); !ok {
				t.Fatalf("frame %d: file is %T", i, v)
			}
		}
		for _, k := range []string{"line", "col"} {
			if v, ok := fo[k]; ok {
				if _, ok := v.(float64); !ok {
					t.Fatalf("frame %d: %s is %T", i, k, v)
				}
			}
		}
		out.frames = append(out.frames, name)
	}
	profiles, ok := doc["profiles"].([]any)
	if !ok {
		t.Fatalf("profiles is %T, want array", doc["profiles"])
	}
	for i, pv := range profiles {
		po, ok := pv.(map[string]any)
		if !ok {
			t.Fatalf("profile %d is %T", i, pv)
		}
		var sp ssProfile
		sp.typeName, _ = po["type"].(string)
		if sp.typeName != "sampled" {
			t.Fatalf("profile %d: type %v, want sampled", i, po["type"])
		}
		if sp.name, ok = po["name"].(string); !ok {
			t.Fatalf("profile %d: name is %T", i, po["name"])
		}
		// speedscope's schema lists these units; stacktop writes
		// nanoseconds, or samples for a profile without a period.
		switch po["unit"] {
		case "none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes", "samples":
		default:
			t.Fatalf("profile %d: unit %v", i, po["unit"])
		}
		sp.unit, _ = po["unit"].(string)
		startV, ok1 := po["startValue"].(float64)
		endV, ok2 := po["endValue"].(float64)
		if !ok1 || !ok2 || endV < startV {
			t.Fatalf("profile %d: startValue %v endValue %v", i, po["startValue"], po["endValue"])
		}
		sp.end = endV
		samples, ok1 := po["samples"].([]any)
		weights, ok2 := po["weights"].([]any)
		if !ok1 || !ok2 || len(samples) != len(weights) {
			t.Fatalf("profile %d: samples %T weights %T, lengths must match", i, po["samples"], po["weights"])
		}
		for j, s := range samples {
			stack, ok := s.([]any)
			if !ok || len(stack) == 0 {
				t.Fatalf("profile %d sample %d: %v", i, j, s)
			}
			var idx []int
			for _, v := range stack {
				f, ok := v.(float64)
				if !ok || f != math.Trunc(f) || f < 0 || int(f) >= len(frames) {
					t.Fatalf("profile %d sample %d: frame index %v out of [0,%d)", i, j, v, len(frames))
				}
				idx = append(idx, int(f))
			}
			sp.samples = append(sp.samples, idx)
			w, ok := weights[j].(float64)
			if !ok || w < 0 {
				t.Fatalf("profile %d weight %d: %v", i, j, weights[j])
			}
			sp.weights = append(sp.weights, w)
		}
		out.profiles = append(out.profiles, sp)
	}
	if v, ok := doc["activeProfileIndex"]; ok {
		f, ok := v.(float64)
		if !ok || f < 0 || int(f) >= max(len(profiles), 1) {
			t.Fatalf("activeProfileIndex %v with %d profiles", v, len(profiles))
		}
		out.active = int(f)
	}
	return out
}

func TestSpeedscopeKnownSplit(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSpeedscope(&buf, knownSplit()); err != nil {
		t.Fatal(err)
	}
	f := checkSpeedscope(t, buf.Bytes())
	if len(f.profiles) != 2 {
		t.Fatalf("%d profiles, want one per thread (2)", len(f.profiles))
	}
	if f.profiles[0].name != "hot-worker (1)" || f.profiles[1].name != "cold-worker (2)" {
		t.Fatalf("profile names %q, %q", f.profiles[0].name, f.profiles[1].name)
	}
	if f.active != 0 {
		t.Fatalf("activeProfileIndex %d, want the busiest thread (0)", f.active)
	}
	leaf := map[string]float64{}
	for _, p := range f.profiles {
		sum := 0.0
		for j, s := range p.samples {
			if root := f.frames[s[0]]; root != "main" {
				t.Fatalf("%s sample %d starts at %q, want the root main", p.name, j, root)
			}
			leaf[f.frames[s[len(s)-1]]] += p.weights[j]
			sum += p.weights[j]
		}
		if sum != p.end {
			t.Fatalf("%s: weights sum to %v, endValue %v", p.name, sum, p.end)
		}
	}
	// Weights are time: 300 and 100 samples of a 10ms period.
	if leaf["hot"] != 3e9 || leaf["cold"] != 1e9 || len(leaf) != 2 {
		t.Fatalf("weight by leaf %v, want hot 3e9 cold 1e9 (ns)", leaf)
	}
	for _, p := range f.profiles {
		if p.unit != "nanoseconds" {
			t.Fatalf("%s: unit %q, want nanoseconds", p.name, p.unit)
		}
	}
	// main occurs at two PCs (0x401100, 0x401108); speedscope merges call
	// trees by frame index, so it must be one frame.
	n := 0
	for _, name := range f.frames {
		if name == "main" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("main appears as %d frames: %v", n, f.frames)
	}
}

// TestSpeedscopeTimeOrder checks each thread's samples keep the order they
// were taken in, which is what the Time Order view draws.
func TestSpeedscopeTimeOrder(t *testing.T) {
	p := profileOf(
		stackSpec{1, "main;x"}, stackSpec{2, "start;w"}, stackSpec{1, "main;y"},
		stackSpec{1, "main;x"}, stackSpec{2, "start;w;deep"}, stackSpec{1, "main;y;z"},
	)
	var buf bytes.Buffer
	if err := WriteSpeedscope(&buf, p); err != nil {
		t.Fatal(err)
	}
	f := checkSpeedscope(t, buf.Bytes())
	got := map[string][]string{}
	for _, pr := range f.profiles {
		for _, s := range pr.samples {
			var names []string
			for _, i := range s {
				names = append(names, f.frames[i])
			}
			got[pr.name] = append(got[pr.name], strings.Join(names, ";"))
		}
	}
	want := map[string][]string{
		"t1 (1)": {"main;x", "main;y", "main;x", "main;y;z"},
		"t2 (2)": {"start;w", "start;w;deep"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("samples in order:\n got %v\nwant %v", got, want)
	}
}

func TestSpeedscopeEdgeCases(t *testing.T) {
	// An empty profile is still a valid file.
	var buf bytes.Buffer
	if err := WriteSpeedscope(&buf, profile.New(1, "", time.Now(), time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if f := checkSpeedscope(t, buf.Bytes()); len(f.profiles) != 0 {
		t.Fatalf("empty profile gave %d profiles", len(f.profiles))
	}

	// An empty stack keeps its weight under a placeholder frame; names
	// that need JSON escaping and invalid UTF-8 survive as valid JSON.
	p := profile.New(1, "cmd", time.Unix(0, 0), time.Millisecond)
	p.Add(profile.Sample{TID: 3, Time: time.Unix(0, 0)})
	odd := "operator<<(\"q\\\n\x01\xff)"
	p.Add(profile.Sample{TID: 3, Time: time.Unix(0, 1), Weight: 5, Frames: []profile.Frame{{Function: odd}}})
	buf.Reset()
	if err := WriteSpeedscope(&buf, p); err != nil {
		t.Fatal(err)
	}
	f := checkSpeedscope(t, buf.Bytes())
	if len(f.profiles) != 1 || len(f.profiles[0].samples) != 2 {
		t.Fatalf("profiles %+v", f.profiles)
	}
	pr := f.profiles[0]
	if f.frames[pr.samples[0][0]] != noFramesName || pr.weights[0] != 1e6 {
		t.Fatalf("empty stack written as %v weight %v", pr.samples[0], pr.weights[0])
	}
	if got := f.frames[pr.samples[1][0]]; got != strings.ToValidUTF8(odd, "\uFFFD") || pr.weights[1] != 5e6 {
		t.Fatalf("odd name read back as %q weight %v", got, pr.weights[1])
	}
	if pr.name != "thread (3)" {
		t.Fatalf("unnamed thread called %q", pr.name)
	}
}

func BenchmarkSpeedscope(b *testing.B) {
	p := knownSplit()
	for b.Loop() {
		if err := WriteSpeedscope(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
}
