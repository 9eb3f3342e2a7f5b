package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// recorder is a backend.Source that passes another's samples on and keeps
// a copy of every round: what a back end yielded, to replay later.
type recorder struct {
	backend.Source
	rounds []capturedRound
}

type capturedRound struct {
	samples []backend.Sample // Stack copied: the back end reuses its buffer
	round   backend.Round
	err     error
}

func (r *recorder) Next(ctx context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	var c capturedRound
	round, err := r.Source.Next(ctx, func(s *backend.Sample) {
		cp := *s
		cp.Stack = slices.Clone(s.Stack)
		c.samples = append(c.samples, cp)
		yield(s)
	})
	c.round, c.err = round, err
	r.rounds = append(r.rounds, c)
	return round, err
}

// replay is a back end that is not one: it yields captured rounds again,
// with no process stopped and no timing of its own. An engine that depends
// on anything but the seam (ptrace's errors, its process, its pacing)
// gives another profile from it than from the live back end.
type replay struct {
	rounds []capturedRound
	next   int
	closed bool
}

func (r *replay) Next(ctx context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	if r.next == len(r.rounds) {
		return backend.Round{}, backend.ErrExited
	}
	c := r.rounds[r.next]
	r.next++
	var buf []byte
	for _, s := range c.samples {
		// One buffer for every sample, as a real back end does: a
		// consumer that kept Stack past yield would see it change.
		buf = append(buf[:0], s.Stack...)
		s.Stack = buf
		yield(&s)
		clear(buf)
	}
	if errors.Is(c.err, context.DeadlineExceeded) || errors.Is(c.err, context.Canceled) {
		// The live run ended on its context: so does the replay.
		return c.round, backend.ErrExited
	}
	return c.round, c.err
}

func (r *replay) Close() error { r.closed = true; return nil }

// TestReplayIsBackEndNeutral records a live process with the ptrace back
// end, keeping a copy of each sample, then feeds the copies to a second
// engine through a replaying back end (and a fresh resolver). Both
// profiles must hold the same stacks with the same weights per thread, and
// the same counters: the engine sees nothing but the seam. On-CPU (weights)
// and wall-clock (Unchanged samples) both.
func TestReplayIsBackEndNeutral(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name   string
		target []string
		opts   EngineOptions
	}{
		{"oncpu", []string{"split-sframe3"}, EngineOptions{Rate: 199, Duration: time.Second}},
		{"wall", []string{"manythreads-sframe3", "6", "1"}, EngineOptions{Rate: 99, Idle: true, Duration: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := targets.Start(t, tc.target[0], tc.target[1:]...)
			live := openTarget(t, tg.PID())
			e := newEngine(t, live, tc.opts)
			rec := &recorder{Source: e.src}
			e.src = rec
			if err := e.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			want, wantSt := e.Snapshot(), e.Stats()

			// A resolver of its own, nothing cached.
			cache := modules.NewModuleCache()
			defer cache.Close()
			res, err := resolve.New(tg.PID(), live.mem, cache, resolve.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			rp := &replay{rounds: rec.rounds}
			e2 := New(rp, res, Options{Period: e.opts.Period, Wall: tc.opts.Idle})
			if err := e2.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, gotSt := e2.Snapshot(), e2.Stats()

			w, g := folded(want), folded(got)
			if len(w) == 0 {
				t.Fatal("the live recording holds no samples: the test proves nothing")
			}
			if !maps.Equal(w, g) {
				t.Errorf("replayed profile differs from the live one:\nlive   %v\nreplay %v", w, g)
			}
			if want.Samples != got.Samples || wantSt.Stops != gotSt.Stops || wantSt.Reused != gotSt.Reused ||
				wantSt.Ticks != gotSt.Ticks || wantSt.MissedTicks != gotSt.MissedTicks || wantSt.Pause != gotSt.Pause {
				t.Errorf("counters differ:\nlive   %+v\nreplay %+v", wantSt, gotSt)
			}
			if tc.opts.Idle && gotSt.Reused == 0 {
				t.Error("no Unchanged sample replayed: the wall-clock path was not exercised")
			}
			t.Logf("%d rounds, %d samples (%d reused), %d stacks", len(rec.rounds), gotSt.Samples, gotSt.Reused, len(g))
		})
	}
}

// folded is p's weight per thread and named stack.
func folded(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, ev := range p.Events {
		var b strings.Builder
		fmt.Fprintf(&b, "%d", ev.TID)
		for _, f := range p.Stacks[ev.Stack] {
			b.WriteString(";" + f.Name())
		}
		out[b.String()] += int64(ev.Weight)
	}
	return out
}

// TestNotesAskedEachRound: Options.Notes is asked on Run's goroutine after
// every round (a perf source's counters are only that goroutine's to read),
// and Stats carries its last answer, during the run (top's header) and
// after it (record's summary).
func TestNotesAskedEachRound(t *testing.T) {
	cache := modules.NewModuleCache()
	defer cache.Close()
	mem := ptrace.NewMemory(os.Getpid())
	defer mem.Close()
	res, err := resolve.New(os.Getpid(), mem, cache, resolve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	rp := &replay{rounds: make([]capturedRound, 3)}
	asked := 0
	notes := func() []string {
		asked++
		if asked < 3 {
			return nil
		}
		return []string{fmt.Sprintf("note after round %d", asked)}
	}
	e := New(rp, res, Options{Period: time.Millisecond, Notes: notes})
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Three rounds and the end (ErrExited): four answers.
	if asked != 4 {
		t.Errorf("Notes asked %d times over 3 rounds and the end, want 4", asked)
	}
	if got := e.Stats().Notes; !slices.Equal(got, []string{"note after round 4"}) {
		t.Errorf("Stats().Notes = %q, want the last answer", got)
	}
}
