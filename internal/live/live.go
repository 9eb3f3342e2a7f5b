// Package live adapts a running engine.Engine to the terminal UI's
// tui.Source, so "stacktop top" is only wiring: open a back end's Source
// and a Resolver, start an Engine on a goroutine, hand live.New(engine) to
// tui.Run.
//
// Lifecycle: the Engine's Run goroutine is the only writer of the profile;
// Snapshot, called by the UI's polling goroutine, takes the engine's lock
// just long enough to copy its counters and take a profile snapshot, so
// the UI never delays a sample and never sees a profile that still changes.
package live

import (
	"sync"

	"codeberg.org/stacktop/stacktop/internal/engine"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/tui"
)

// Source is a tui.Source over an Engine.
type Source struct {
	engine *engine.Engine

	mu      sync.Mutex
	exitMsg string
	filter  func(*profile.Profile) *profile.Profile
}

// New returns a Source polling e.
func New(e *engine.Engine) *Source { return &Source{engine: e} }

// SetExitMsg sets the text shown once the target is gone (for example
// "exit status 3" when stacktop started the program and knows its status).
// Without it an exited target shows "process exited".
func (s *Source) SetExitMsg(msg string) {
	s.mu.Lock()
	s.exitMsg = msg
	s.mu.Unlock()
}

// SetFilter makes each snapshot pass through filter before the UI sees
// it (top --thread-name keeps some threads only).
func (s *Source) SetFilter(filter func(*profile.Profile) *profile.Profile) {
	s.mu.Lock()
	s.filter = filter
	s.mu.Unlock()
}

// Snapshot implements tui.Source. It returns at once.
func (s *Source) Snapshot() tui.Status {
	st := s.engine.Stats()
	prof := s.engine.Snapshot()
	s.mu.Lock()
	filter := s.filter
	s.mu.Unlock()
	if filter != nil {
		prof = filter(prof)
	}
	out := Status(st, prof)
	if st.Exited {
		s.mu.Lock()
		out.ExitMsg = s.exitMsg
		s.mu.Unlock()
		if out.ExitMsg == "" {
			out.ExitMsg = "process exited"
		}
	}
	return out
}

// Status is what the UI shows of an engine's counters and profile: the
// profile only once it holds samples (or the process is gone), so the UI
// says "waiting for samples" until then. ExitMsg is the caller's.
func Status(st engine.Stats, prof *profile.Profile) tui.Status {
	out := tui.Status{
		Rate:    st.Rate,
		Pause:   tui.PauseStats{Median: st.Pause.Median, P99: st.Pause.P99, Max: st.Pause.Max},
		Threads: st.Threads,
		Lost:    st.Lost,
		Exited:  st.Exited,
		Err:     st.LastErr,
		Notes:   st.Notes,
	}
	if len(prof.Events) > 0 || st.Exited {
		out.Profile = prof
	}
	return out
}

var _ tui.Source = (*Source)(nil)
