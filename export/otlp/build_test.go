package otlp

import (
	"testing"
	"time"

	"stacktop/profile"
)

// TestPeriodType: an on-CPU profile's period is CPU time, a wall-clock
// one's (record --idle) wall time, as in the pprof output.
func TestPeriodType(t *testing.T) {
	for _, wall := range []bool{false, true} {
		p := profile.New(1, "prog", time.Unix(1e9, 0), 10*time.Millisecond)
		p.Wall = wall
		p.Add(profile.Sample{TID: 1, ThreadName: "prog", Time: p.Start,
			Frames: []profile.Frame{{PC: 0x1000, Function: "main"}}})
		req := Build(p, Resource{PID: 1})
		prof := req.ResourceProfiles[0].ScopeProfiles[0].Profiles[0]
		got := req.Dictionary.StringTable[prof.PeriodType.TypeStrindex]
		want := "cpu"
		if wall {
			want = "wall"
		}
		if got != want {
			t.Errorf("Wall %v: period type %q, want %q", wall, got, want)
		}
	}
}
