package resolve

import (
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/profile"
)

func TestEndAtGoRoot(t *testing.T) {
	fr := func(names ...string) []profile.Frame {
		var out []profile.Frame
		for _, n := range names {
			out = append(out, profile.Frame{Function: n})
		}
		return out
	}
	cases := []struct {
		in       []profile.Frame
		complete bool
		n        int
	}{
		{fr("main.f", "runtime.goexit.abi0"), true, 2},
		{fr("runtime.futex.abi0", "runtime.mstart0", "runtime.mstart.abi0", "runtime.clone.abi0", "junk"), true, 4},
		{fr("runtime.park_m", "runtime.mcall", "junk", "more"), true, 2},
		{fr("runtime.mstart.abi0", "runtime.rt0_go.abi0"), true, 2},
		{fr("main.f", "main.g"), false, 2},
		{fr("runtime.goexit1", "x"), false, 2},
	}
	for _, c := range cases {
		ts := Stack{Frames: c.in, Err: errors.New("walk stopped")}
		endAtGoRoot(&ts)
		if ts.Complete != c.complete || len(ts.Frames) != c.n || (ts.Complete && ts.Err != nil) {
			t.Errorf("%v: complete %v, %d frames, err %v; want %v, %d", c.in, ts.Complete, len(ts.Frames), ts.Err, c.complete, c.n)
		}
	}
}
