package otlp

import (
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
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

// TestServerText: a server's words reach the terminal quoted, control
// sequences escaped, cut on a rune boundary.
func TestServerText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"  overloaded \n", 200, `"overloaded"`},
		{"\x1b[2Jgone", 200, `"\x1b[2Jgone"`},
		{"bad \xff byte", 200, `"bad \xff byte"`},
		{"ééééé", 4, `"éééé"...`},
	} {
		if got := ServerText(c.in, c.max); got != c.want {
			t.Errorf("ServerText(%q, %d) = %s, want %s", c.in, c.max, got, c.want)
		}
	}
}
