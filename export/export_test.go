package export

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/profile"
)

// knownSplit is a profile whose time split is known by construction: 75% in
// main;a;hot (thread 1) and 25% in main;b;cold (thread 2). hot is inlined
// into a, so pprof must fold them into one location.
func knownSplit() *profile.Profile {
	start := time.Unix(1700000000, 0)
	p := profile.New(42, "fixture --arg", start, 10*time.Millisecond)
	mod := profile.Frame{Module: "/usr/bin/fixture", BuildID: "abcd", MapStart: 0x400000, MapLimit: 0x500000}
	fr := func(pc uint64, name string, inlined bool) profile.Frame {
		f := mod
		f.PC, f.Function, f.Inlined, f.Method = pc, name, inlined, "sframe"
		return f
	}
	hot := []profile.Frame{fr(0x401010, "hot", true), fr(0x401010, "a", false), fr(0x401100, "main", false)}
	cold := []profile.Frame{fr(0x402010, "cold", false), fr(0x402100, "b", false), fr(0x401108, "main", false)}
	for i := 0; i < 400; i++ {
		at := start.Add(time.Duration(i) * 10 * time.Millisecond)
		if i%4 == 0 {
			p.Add(profile.Sample{TID: 2, ThreadName: "cold-worker", Time: at, Frames: cold})
		} else {
			p.Add(profile.Sample{TID: 1, ThreadName: "hot-worker", Time: at, Frames: hot})
		}
	}
	return p
}

func TestFoldedReadsBack(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFolded(&buf, knownSplit(), FoldedOptions{}); err != nil {
		t.Fatal(err)
	}
	got := parseFolded(t, buf.String())
	if got["main;a;hot"] != 300 || got["main;b;cold"] != 100 || len(got) != 2 {
		t.Fatalf("folded read back as %v", got)
	}
	buf.Reset()
	WriteFolded(&buf, knownSplit(), FoldedOptions{ThreadRoot: true})
	if got := parseFolded(t, buf.String()); got["hot-worker 1;main;a;hot"] != 300 {
		t.Fatalf("thread-rooted folded read back as %v", got)
	}
}

// parseFolded is an independent reader of the format: the count follows the
// last space.
func parseFolded(t *testing.T, s string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("folded line without count: %q", line)
		}
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q: %v", line, err)
		}
		out[line[:i]] += n
	}
	return out
}

func TestPprofReadsBack(t *testing.T) {
	var buf bytes.Buffer
	if err := WritePprof(&buf, knownSplit()); err != nil {
		t.Fatal(err)
	}
	pp, err := pprof.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.CheckValid(); err != nil {
		t.Fatal(err)
	}
	leaf := map[string]int64{}
	for _, s := range pp.Sample {
		loc := s.Location[0]
		leaf[loc.Line[0].Function.Name] += s.Value[0]
		if s.NumLabel["thread"] == nil || s.Label["thread_name"] == nil {
			t.Fatalf("sample without thread labels: %v", s)
		}
	}
	if leaf["hot"] != 300 || leaf["cold"] != 100 {
		t.Fatalf("leaf counts %v", leaf)
	}
	for _, l := range pp.Location {
		if l.Address == 0x401010 && len(l.Line) != 2 {
			t.Fatalf("inlined frames not folded into one location: %d lines", len(l.Line))
		}
	}
	if len(pp.Mapping) != 1 || pp.Mapping[0].BuildID != "abcd" {
		t.Fatalf("mappings %v", pp.Mapping)
	}
}

// TestPprofOpensInGoTool runs the real consumer.
func TestPprofOpensInGoTool(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	path := filepath.Join(t.TempDir(), "p.pb.gz")
	f, _ := os.Create(path)
	if err := WritePprof(f, knownSplit()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command(gobin, "tool", "pprof", "-top", "-sample_index=samples", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	flat := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 6 && strings.HasSuffix(fs[1], "%") {
			flat[fs[5]] = fs[1] // name; "(inline)" may follow
		}
	}
	if flat["hot"] != "75.00%" || flat["cold"] != "25.00%" {
		t.Fatalf("go tool pprof -top shares: hot %q cold %q\n%s", flat["hot"], flat["cold"], out)
	}
}

// TestPprofSampleTypes: an on-CPU profile is cpu/nanoseconds, a wall-clock
// one (--idle) wall/nanoseconds, and a weighted sample's value is its
// weight in periods.
func TestPprofSampleTypes(t *testing.T) {
	for _, wall := range []bool{false, true} {
		p := profile.New(1, "x", time.Unix(1700000000, 0), 10*time.Millisecond)
		p.Wall = wall
		p.Add(profile.Sample{TID: 1, Time: p.Start, Weight: 3, Frames: []profile.Frame{{PC: 0x1000, Function: "f"}}})
		pp := BuildPprof(p)
		want := "cpu"
		if wall {
			want = "wall"
		}
		if st := pp.SampleType[1]; st.Type != want || st.Unit != "nanoseconds" || pp.PeriodType.Type != want || pp.DefaultSampleType != want {
			t.Errorf("wall=%v: sample type %s/%s, period type %s, default %q", wall, st.Type, st.Unit, pp.PeriodType.Type, pp.DefaultSampleType)
		}
		if v := pp.Sample[0].Value; v[0] != 3 || v[1] != 30_000_000 {
			t.Errorf("wall=%v: values %v, want [3 30000000]", wall, v)
		}
	}
}

// TestPprofUnnamedFrames: a frame stacktop could not name is a location
// with its address and mapping and no line, and the mapping's Has* flags
// say what all its locations have: pprof's symbolizer leaves alone a
// mapping with any flag set.
func TestPprofUnnamedFrames(t *testing.T) {
	start := time.Unix(1700000000, 0)
	p := profile.New(42, "fixture", start, 10*time.Millisecond)
	prog := profile.Frame{Module: "/usr/bin/fixture", BuildID: "abcd", MapStart: 0x400000, MapLimit: 0x500000, MapOffset: 0x1000}
	libc := profile.Frame{Module: "/lib/libc.so.6", BuildID: "ef01", MapStart: 0x7f0000, MapLimit: 0x7f8000}
	at := func(m profile.Frame, pc uint64, fn, file string, line int) profile.Frame {
		m.PC, m.Function, m.File, m.Line = pc, fn, file, line
		return m
	}
	p.Add(profile.Sample{TID: 1, Time: start, Frames: []profile.Frame{
		at(libc, 0x7f0010, "read", "read.c", 26),
		at(prog, 0x401010, "", "", 0), // stripped: no name
		at(prog, 0x401100, "main", "", 0),
	}})
	out := BuildPprof(p)
	var progMap, libcMap *pprof.Mapping
	for _, m := range out.Mapping {
		switch m.File {
		case prog.Module:
			progMap = m
		case libc.Module:
			libcMap = m
		}
	}
	if progMap == nil || libcMap == nil {
		t.Fatalf("mappings %v", out.Mapping)
	}
	if progMap.HasFunctions || progMap.HasFilenames || progMap.HasLineNumbers || progMap.HasInlineFrames {
		t.Errorf("the program's mapping, with an unnamed frame, claims symbols: %+v", progMap)
	}
	if !libcMap.HasFunctions || !libcMap.HasFilenames || !libcMap.HasLineNumbers || !libcMap.HasInlineFrames {
		t.Errorf("libc's mapping, named with lines, does not say so: %+v", libcMap)
	}
	if progMap.BuildID != "abcd" || progMap.Offset != 0x1000 {
		t.Errorf("the program's mapping lost its build ID or offset: %+v", progMap)
	}
	for _, loc := range out.Location {
		if loc.Address == 0x401010 {
			if len(loc.Line) != 0 || loc.Mapping != progMap {
				t.Errorf("unnamed frame: lines %v, mapping %v; want none, the program's", loc.Line, loc.Mapping)
			}
			return
		}
	}
	t.Error("no location for the unnamed frame")
}
