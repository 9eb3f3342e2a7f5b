package profile

import (
	"testing"
	"time"
)

func stack(names ...string) []Frame {
	fs := make([]Frame, len(names))
	for i, n := range names {
		fs[i] = Frame{PC: uint64(0x1000 + 16*len(n) + i), Function: n, Module: "/bin/t", Method: "sframe"}
	}
	return fs
}

// knownSplit builds 75 samples of main;a;hot and 25 of main;b;cold (leaf first
// below), plus a recursive stack, spread over 10 seconds.
func knownSplit(t testing.TB) *Profile {
	start := time.Unix(1000, 0)
	p := New(42, "t", start, 10*time.Millisecond)
	for i := 0; i < 100; i++ {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		if i%4 == 3 {
			p.Add(Sample{TID: 2, ThreadName: "w2", Time: at, Frames: stack("cold", "b", "main")})
		} else {
			p.Add(Sample{TID: 1, ThreadName: "w1", Time: at, Frames: stack("hot", "a", "main")})
		}
	}
	return p
}

func TestFunctionsSelfTotal(t *testing.T) {
	p := knownSplit(t)
	if len(p.Stacks) != 2 {
		t.Fatalf("interned %d stacks, want 2", len(p.Stacks))
	}
	got := map[string]FunctionStat{}
	for _, f := range p.Aggregate(0).Functions() {
		got[f.Name] = f
	}
	want := map[string][2]int64{"main": {0, 100}, "a": {0, 75}, "hot": {75, 75}, "b": {0, 25}, "cold": {25, 25}}
	for name, w := range want {
		if g := got[name]; g.Self != w[0] || g.Total != w[1] {
			t.Errorf("%s: self %d total %d, want %d %d", name, g.Self, g.Total, w[0], w[1])
		}
	}
}

func TestRecursionCountsTotalOnce(t *testing.T) {
	p := New(1, "t", time.Unix(0, 0), time.Millisecond)
	p.Add(Sample{TID: 1, Time: time.Unix(0, 0), Frames: stack("f", "f", "f", "main")})
	fs := p.Aggregate(0).Functions()
	if fs[0].Name != "f" && fs[0].Name != "main" {
		t.Fatalf("unexpected order %v", fs)
	}
	for _, f := range fs {
		if f.Total != 1 {
			t.Errorf("%s total %d, want 1", f.Name, f.Total)
		}
	}
}

func TestTree(t *testing.T) {
	root := knownSplit(t).Aggregate(0).Tree()
	if root.Total != 100 || len(root.Children) != 1 || root.Children[0].Name != "main" {
		t.Fatalf("root %+v", root)
	}
	m := root.Children[0]
	if len(m.Children) != 2 || m.Children[0].Name != "a" || m.Children[0].Total != 75 || m.Children[1].Total != 25 {
		t.Fatalf("main's children not sorted by total: %+v %+v", m.Children[0], m.Children[1])
	}
	if hot := m.Children[0].Children[0]; hot.Name != "hot" || hot.Self != 75 {
		t.Fatalf("hot %+v", hot)
	}
}

func TestWindow(t *testing.T) {
	p := knownSplit(t)
	// The last 2 s hold samples 80..99: 15 hot, 5 cold.
	a := p.Aggregate(p.Duration() - 1900*time.Millisecond)
	if a.Total != 20 || a.ThreadCounts[1] != 15 || a.ThreadCounts[2] != 5 {
		t.Fatalf("window total %d threads %v", a.Total, a.ThreadCounts)
	}
}

func TestSnapshotIsolated(t *testing.T) {
	p := knownSplit(t)
	s := p.Snapshot()
	p.Add(Sample{TID: 3, Time: p.Start.Add(20 * time.Second), Frames: stack("new", "main")})
	if s.Samples != 100 || len(s.Events) != 100 || s.Threads[3] != nil || len(s.Stacks) != 2 {
		t.Fatalf("snapshot changed after Add: samples %d events %d stacks %d", s.Samples, len(s.Events), len(s.Stacks))
	}
	if s.Aggregate(0).Total != 100 {
		t.Fatal("snapshot aggregate sees new events")
	}
}

// TestFrameNames: one table for both forms of a frame's name, the one
// profiles group by (Name) and the one a stack listing prints (Label).
func TestFrameNames(t *testing.T) {
	for _, tc := range []struct {
		f           Frame
		name, label string
	}{
		{Frame{PC: 0x7f0000001234, Module: "/usr/lib/libfoo.so.1", Offset: 0x1234},
			"libfoo.so.1+0x1234", "libfoo.so.1+0x1234"},
		{Frame{PC: 0x55000000114f, Function: "main", Offset: 0x2f, Module: "/usr/bin/prog"},
			"main", "main+0x2f"},
		{Frame{PC: 0x55000000114f, Function: "main", Module: "/usr/bin/prog"},
			"main", "main+0x0"},
		{Frame{PC: 0x7f00000064af, Module: "/lib/libc.so.6", Offset: 0x64af, After: "sleep"},
			"libc.so.6+0x64af", "libc.so.6+0x64af (after sleep)"},
		{Frame{PC: 0x55000000114f, Function: "add", Inlined: true, Module: "/usr/bin/prog"},
			"add", "add"},
		{Frame{PC: 0x7f0000000fff, Function: SignalFrame, Module: "[vdso]"},
			SignalFrame, SignalFrame},
		{Frame{PC: 0x7f1234, Offset: 0x234}, "0x7f1234", "0x7f1234"},
		{Frame{PC: 0x7f1234, Module: "[vdso]", Offset: 0x234}, "[vdso]+0x234", "[vdso]+0x234"},
		{Frame{}, "0x0", "0x0"},
		{Frame{PC: 0x7f1234, After: "jit_stub"}, "0x7f1234", "0x7f1234 (after jit_stub)"},
		{Frame{PC: 0x7f1234, Function: "g", Inlined: true, Offset: 5}, "g", "g"},
	} {
		if got := tc.f.Name(); got != tc.name {
			t.Errorf("%+v: Name() = %q, want %q", tc.f, got, tc.name)
		}
		if got := tc.f.Label(); got != tc.label {
			t.Errorf("%+v: Label() = %q, want %q", tc.f, got, tc.label)
		}
		if got := string(tc.f.AppendLabel([]byte("#0 "))); got != "#0 "+tc.label {
			t.Errorf("%+v: AppendLabel = %q, want %q", tc.f, got, "#0 "+tc.label)
		}
	}
	if got := ModuleBase(""); got != "??" {
		t.Errorf(`ModuleBase("") = %q, want "??"`, got)
	}
	if got := ModuleBase("/a/b/libfoo.so"); got != "libfoo.so" {
		t.Errorf("ModuleBase = %q, want libfoo.so", got)
	}
}

func BenchmarkAdd(b *testing.B) {
	start := time.Unix(0, 0)
	p := New(1, "t", start, time.Millisecond)
	var stacks [][]Frame
	for i := 0; i < 64; i++ {
		fs := make([]Frame, 30)
		for j := range fs {
			fs[j] = Frame{PC: uint64(0x400000 + i*0x100 + j), Function: "function_name_of_some_length", Module: "/usr/bin/x"}
		}
		stacks = append(stacks, fs)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Add(Sample{TID: i % 8, Time: start.Add(time.Duration(i)), Frames: stacks[i%len(stacks)]})
	}
}

// idleRun records one sample of thread 7 then n-1 Repeats, 10 ms apart
// from start, as the sampler does for a thread that never runs again.
func idleRun(p *Profile, start time.Time, n int) {
	th := p.Add(Sample{TID: 7, Time: start, Frames: stack("futex_wait", "idle_loop")})
	for i := 1; i < n; i++ {
		p.Repeat(th, start.Add(time.Duration(i)*10*time.Millisecond))
	}
}

func TestRepeatsShareOneEvent(t *testing.T) {
	start := time.Unix(1000, 0)
	p := New(1, "t", start, 10*time.Millisecond)
	idleRun(p, start, 500) // 4.99 s: within RunLimit
	if len(p.Events) != 1 || p.Events[0].Weight != 500 || p.Events[0].Span != 4990*time.Millisecond {
		t.Fatalf("500 repeats of one stack stored as %+v", p.Events)
	}
	if p.Samples != 500 || p.Threads[7].Samples != 500 || p.Duration() != 4990*time.Millisecond {
		t.Fatalf("samples %d, thread %d, duration %v", p.Samples, p.Threads[7].Samples, p.Duration())
	}
	// A window that cuts the run counts the samples at or after its start:
	// samples 200..499 are at 2.0 s .. 4.99 s.
	for _, c := range []struct {
		from time.Duration
		want int64
	}{{0, 500}, {2 * time.Second, 300}, {1995 * time.Millisecond, 300}, {4990 * time.Millisecond, 1}, {5 * time.Second, 0}} {
		if got := p.Aggregate(c.from).Total; got != c.want {
			t.Errorf("window from %v: %d samples, want %d", c.from, got, c.want)
		}
	}
}

func TestRunsEnd(t *testing.T) {
	start := time.Unix(1000, 0)
	p := New(1, "t", start, 10*time.Millisecond)
	idleRun(p, start, int(RunLimit/(10*time.Millisecond))*2+1)
	if len(p.Events) != 2 {
		t.Fatalf("%d events for two RunLimits of repeats, want 2", len(p.Events))
	}
	for _, e := range p.Events {
		if e.Span > RunLimit {
			t.Errorf("event spans %v, more than RunLimit", e.Span)
		}
	}
	// Samples 1500..2000 are at 15 s .. 20 s.
	if got, want := p.Aggregate(RunLimit+5*time.Second).Total, int64(501); got != want {
		t.Errorf("window over the second run: %d samples, want %d", got, want)
	}

	// A new stack (Add) ends the run, and a Snapshot seals it: the
	// snapshot's events never change.
	at := start.Add(time.Minute)
	th := p.Add(Sample{TID: 7, Time: at, Frames: stack("read", "idle_loop")})
	p.Repeat(th, at.Add(10*time.Millisecond))
	s := p.Snapshot()
	n, w := len(s.Events), s.Events[len(s.Events)-1].Weight
	p.Repeat(th, at.Add(20*time.Millisecond))
	if w != 2 || s.Events[n-1].Weight != 2 || len(p.Events) != n+1 {
		t.Fatalf("after a snapshot, a repeat changed a shared event (weight %d -> %d) or did not start a new one (%d events, had %d)",
			w, s.Events[n-1].Weight, len(p.Events), n)
	}
}

// TestSetFramesAfterSnapshot: a stack completed later (its lines loaded)
// is what the profile and later snapshots show; an earlier snapshot keeps
// what it saw.
func TestSetFramesAfterSnapshot(t *testing.T) {
	start := time.Unix(1000, 0)
	p := New(42, "t", start, 10*time.Millisecond)
	th := p.Add(Sample{TID: 1, Time: start, Frames: stack("leaf", "main")})
	before := p.Snapshot()
	full := stack("leaf", "main")
	full[0].File, full[0].Line = "leaf.c", 7
	inl := Frame{PC: full[0].PC, Function: "inlined", Inlined: true, Method: "sframe"}
	full = append([]Frame{inl}, full...)
	p.SetFrames(th.LastStack, full)
	if got := before.Stacks[0]; len(got) != 2 || got[0].Line != 0 {
		t.Fatalf("earlier snapshot changed: %+v", got)
	}
	after := p.Snapshot()
	if got := after.Stacks[0]; len(got) != 3 || got[1].Line != 7 {
		t.Fatalf("stack not replaced: %+v", got)
	}
	if m := after.MethodFrames(); m["sframe"] != 3 {
		t.Fatalf("method frames %v, want 3 sframe", m)
	}
	// The same sampled stack, added again without lines, is the same stack.
	p.Add(Sample{TID: 1, Time: start.Add(time.Millisecond), Frames: stack("leaf", "main")})
	if len(p.Stacks) != 1 {
		t.Fatalf("%d stacks, want 1", len(p.Stacks))
	}
	// And added with the complete frames, too: the index knows them.
	if th := p.Add(Sample{TID: 1, Time: start.Add(2 * time.Millisecond), Frames: full}); th.LastStack != 0 || len(p.Stacks) != 1 {
		t.Fatalf("the complete frames went to stack %d of %d, want the replaced stack 0", th.LastStack, len(p.Stacks))
	}
}

// TestSetFramesKeyTaken: when the complete frames were interned already
// (another id), SetFrames keeps that id for them: one answer, no move.
func TestSetFramesKeyTaken(t *testing.T) {
	start := time.Unix(1000, 0)
	p := New(42, "t", start, 10*time.Millisecond)
	full := stack("leaf", "main")
	full[0].Line = 7
	full = append([]Frame{{PC: full[0].PC, Function: "inlined", Inlined: true}}, full...)
	a := p.Add(Sample{TID: 1, Time: start, Frames: stack("leaf", "main")}).LastStack
	b := p.Add(Sample{TID: 2, Time: start, Frames: full}).LastStack
	p.SetFrames(a, full)
	if got := p.Add(Sample{TID: 1, Time: start.Add(time.Millisecond), Frames: full}).LastStack; got != b {
		t.Fatalf("complete frames went to stack %d, want %d (interned with them first)", got, b)
	}
	if got := p.Add(Sample{TID: 1, Time: start.Add(2 * time.Millisecond), Frames: stack("leaf", "main")}).LastStack; got != a {
		t.Fatalf("the old frames went to stack %d, want %d", got, a)
	}
}
