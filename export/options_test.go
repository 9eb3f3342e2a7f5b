package export

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/profile"
)

// TestThreadsOption: with Options.Threads every format that draws a tree
// has "NAME TID" as the root frame of each thread's stacks, and pprof
// labels each sample with thread, thread_name and pid.
func TestThreadsOption(t *testing.T) {
	p := knownSplit()
	write := func(f Format) []byte {
		var buf bytes.Buffer
		if err := WriteOptions(&buf, p, f, Options{Threads: true}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}

	folded := parseFolded(t, string(write(FormatFolded)))
	if folded["hot-worker 1;main;a;hot"] != 300 || folded["cold-worker 2;main;b;cold"] != 100 || len(folded) != 2 {
		t.Errorf("folded --threads: %v", folded)
	}

	// Each thread draws its own main, so names repeat: read the SVG's
	// frame groups directly.
	svg := string(write(FormatSVG))
	for _, want := range []string{
		`data-n="300" data-d="1" data-a="3.00 s CPU"><title>hot-worker 1 (3.00 s CPU, 75.00%)</title>`,
		`data-n="100" data-d="1" data-a="1.00 s CPU"><title>cold-worker 2 (1.00 s CPU, 25.00%)</title>`,
		`data-n="300" data-d="2" data-a="3.00 s CPU" data-m="fixture"><title>main (3.00 s CPU`,
		`data-n="100" data-d="2" data-a="1.00 s CPU" data-m="fixture"><title>main (1.00 s CPU`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg --threads lacks %s", want)
		}
	}

	ss := checkSpeedscope(t, write(FormatSpeedscope))
	for _, pr := range ss.profiles {
		root := strings.TrimSuffix(strings.Replace(pr.name, " (", " ", 1), ")") // "hot-worker (1)" -> "hot-worker 1"
		for _, s := range pr.samples {
			if got := ss.frames[s[0]]; got != root {
				t.Fatalf("speedscope --threads: %s sample starts at %q, want %q", pr.name, got, root)
			}
		}
	}

	pp, err := pprof.Parse(bytes.NewReader(write(FormatPprof)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pp.Sample {
		tid, pid, name := s.NumLabel["thread"], s.NumLabel["pid"], s.Label["thread_name"]
		if len(tid) != 1 || len(pid) != 1 || pid[0] != 42 || len(name) != 1 {
			t.Fatalf("pprof sample labels %v %v, want thread, thread_name and pid 42", s.Label, s.NumLabel)
		}
		if s.Location[len(s.Location)-1].Line[0].Function.Name != "main" {
			t.Errorf("pprof --threads: root %q, want main (threads are labels there)", s.Location[len(s.Location)-1].Line[0].Function.Name)
		}
	}
}

// TestFoldedLines: --lines names each frame "func (file:line)" where the
// line is known, so two call sites in one function are two frames.
func TestFoldedLines(t *testing.T) {
	start := time.Unix(1700000000, 0)
	p := profile.New(1, "lines", start, 10*time.Millisecond)
	fr := func(name, file string, line int) profile.Frame {
		return profile.Frame{PC: uint64(0x1000 + line), Function: name, File: file, Line: line, Module: "/bin/lines"}
	}
	p.Add(profile.Sample{TID: 1, Time: start, Frames: []profile.Frame{fr("leaf", "/src/a.c", 10), fr("main", "/src/main.c", 5)}})
	p.Add(profile.Sample{TID: 1, Time: start.Add(10 * time.Millisecond), Frames: []profile.Frame{fr("leaf", "/src/a.c", 12), fr("main", "/src/main.c", 5)}})
	p.Add(profile.Sample{TID: 1, Time: start.Add(20 * time.Millisecond), Frames: []profile.Frame{fr("leaf", "", 0), fr("main", "/src/main.c", 7)}})
	var buf bytes.Buffer
	if err := WriteOptions(&buf, p, FormatFolded, Options{Lines: true}); err != nil {
		t.Fatal(err)
	}
	got := parseFolded(t, buf.String())
	want := map[string]int64{
		"main (main.c:5);leaf (a.c:10)": 1,
		"main (main.c:5);leaf (a.c:12)": 1,
		"main (main.c:7);leaf":          1,
	}
	if len(got) != len(want) {
		t.Fatalf("folded --lines: %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("folded --lines: %q has %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

// TestSpeedscopeUnits: weights are nanoseconds (samples x period); a
// profile without a period counts samples.
func TestSpeedscopeUnits(t *testing.T) {
	p := profile.New(1, "", time.Unix(0, 0), 0)
	p.Add(profile.Sample{TID: 1, Time: time.Unix(0, 0), Weight: 3, Frames: []profile.Frame{{Function: "f"}}})
	var buf bytes.Buffer
	if err := WriteSpeedscope(&buf, p); err != nil {
		t.Fatal(err)
	}
	f := checkSpeedscope(t, buf.Bytes())
	if pr := f.profiles[0]; pr.unit != "samples" || pr.weights[0] != 3 {
		t.Errorf("no period: unit %q weight %v, want samples 3", pr.unit, pr.weights[0])
	}
	if strings.Contains(buf.String(), `"unit":"none"`) {
		t.Errorf("unit none written")
	}
}

// TestThreadsOptionFolded: --threads roots the folded samples (see
// profile.KeepTimeline) too, as record folds under --threads.
func TestThreadsOptionFolded(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	p := profile.New(42, "x", t0, 10*time.Millisecond)
	p.KeepTimeline(time.Second)
	fr := func(names ...string) []profile.Frame {
		out := make([]profile.Frame, len(names))
		for i, n := range names {
			out[i] = profile.Frame{PC: uint64(0x1000 + i), Function: n}
		}
		return out
	}
	for i := 0; i < 10000; i++ {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		p.Add(profile.Sample{TID: 1, ThreadName: "hot", Time: at, Frames: fr("spin", "main")})
		cold := fr("poll", "main")
		if i < 200 { // only in the folded part
			cold = fr("wait", "main")
		}
		p.Add(profile.Sample{TID: 2, ThreadName: "cold", Time: at, Frames: cold})
	}
	if len(p.Folded) == 0 {
		t.Fatal("nothing was folded: the test needs a folded profile")
	}
	var buf bytes.Buffer
	if err := WriteOptions(&buf, p.Snapshot(), FormatFolded, Options{Threads: true}); err != nil {
		t.Fatal(err)
	}
	got := parseFolded(t, buf.String())
	want := map[string]int64{"hot 1;main;spin": 10000, "cold 2;main;wait": 200, "cold 2;main;poll": 9800}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("folded --threads of a folded profile: %v, want %v", got, want)
	}
}
