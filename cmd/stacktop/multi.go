package main

import (
	"fmt"
	"os"
	"regexp"

	"codeberg.org/stacktop/stacktop/internal/live"
	"codeberg.org/stacktop/stacktop/internal/procgroup"
	"codeberg.org/stacktop/stacktop/internal/session"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/tui"
)

// threadFilter keeps the threads whose name matches --thread-name. It is
// applied to the profile, not to sampling: a thread often names itself
// after it starts, so its name at the first sample can be a stale one.
func threadFilter(re *regexp.Regexp) func(*profile.Profile) *profile.Profile {
	if re == nil {
		return func(p *profile.Profile) *profile.Profile { return p }
	}
	return func(p *profile.Profile) *profile.Profile {
		return p.SelectThreads(func(th *profile.Thread) bool { return re.MatchString(th.Name) })
	}
}

// groupSource is top's tui.Source over a processGroup: each poll merges the
// engines' snapshots (the cost of one profile.Merge per refresh).
type groupSource struct {
	fl     *procgroup.Group
	filter func(*profile.Profile) *profile.Profile
}

func (s groupSource) Snapshot() tui.Status {
	st, n := s.fl.Stats()
	out := live.Status(st, s.filter(s.fl.Profile()))
	if st.Exited {
		out.ExitMsg = fmt.Sprintf("all %d processes exited", n)
	}
	return out
}

// newProcessGroup makes a procgroup.Group of first, the session
// startSession made: every other process of the group is attached with
// f's flags and opts (-p's list, --subprocesses' children).
func newProcessGroup(tr *ptrace.Tracer, f *samplingFlags, opts session.Options, first *session.Session) *procgroup.Group {
	return procgroup.New(member(first), func(pid int) (procgroup.Member, error) {
		s, err := session.Start(tr, pid, nil, [3]*os.File{}, opts)
		if err != nil {
			return procgroup.Member{}, err
		}
		return member(s), nil
	})
}

// member is a session as a process of a procgroup.Group.
func member(s *session.Session) procgroup.Member {
	return procgroup.Member{PID: s.PID, Engine: s.Engine, Detach: s.Detach, Close: s.Close}
}
