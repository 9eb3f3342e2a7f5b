package perfevent

// Draining the rings: records parsed and ordered by time, samples turned
// into backend.Samples, and the records after an exec kept for the next
// round.

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/backend"
)

// errBeforeExec is the Round.Err of samples dropped because an execve
// followed them in the same round: their address space is gone.
var errBeforeExec = errors.New("perfevent: sample taken before the process called execve")

// drain parses every ring up to its head, orders the records by time (with
// those an exec left over) and handles them, then releases the rings. At
// the first exec record of the process it stops and reports true: the
// engine names samples as they are yielded and reloads the address space
// only after a round with Exec, so the records after it are copied out of
// the rings (at most the rings' size, once per exec) for the next round.
func (s *Source) drain(round *backend.Round, yield func(*backend.Sample)) bool {
	s.pending = append(s.pending[:0], s.carry...)
	s.carry = s.carry[:0]
	for i, r := range s.rings {
		if r == nil {
			continue
		}
		r.ring.Begin()
		for {
			b, pos, ok := r.ring.Next()
			if !ok {
				break
			}
			s.pending = append(s.pending, pending{ring: i})
			p := &s.pending[len(s.pending)-1]
			if err := s.format.ParseRecord(b, &p.rec); err != nil {
				var fe *FormatError
				if errors.As(err, &fe) {
					fe.Pos = pos
				}
				round.Failed++
				round.Err = err
				s.pending = s.pending[:len(s.pending)-1]
				continue
			}
			// A record that straddled the ring's end lives in the
			// ring's scratch buffer; only one record per pass can
			// straddle, so it stays valid until Release.
		}
		if err := r.ring.Err(); err != nil {
			round.Failed++
			round.Err = err
		}
	}
	sort.SliceStable(s.pending, func(a, b int) bool { return s.pending[a].rec.Time < s.pending[b].rec.Time })
	end := len(s.pending) // the exec record, else past the last
	for i := range s.pending {
		if rec := &s.pending[i].rec; rec.Type == RecordComm && rec.Exec && int(rec.PID) == s.pid {
			end = i
			break
		}
	}
	for i := range s.pending[:min(end+1, len(s.pending))] {
		rec := &s.pending[i].rec
		switch rec.Type {
		case RecordSample:
			if int(rec.PID) != s.pid {
				s.stats.OtherProcs++
				continue
			}
			if i < end && end < len(s.pending) {
				round.Failed++
				round.Err = errBeforeExec
				continue
			}
			if err := s.fillSample(rec); err != nil {
				round.Failed++
				round.Err = err
				continue
			}
			yield(&s.sample)
		case RecordLost, RecordLostSamples:
			round.Lost += int64(rec.Lost)
		case RecordComm:
			if rec.Exec && int(rec.PID) == s.pid {
				round.Exec = true
				s.stats.Execs++
				s.mapsMoved = true
			}
		case RecordMmap, RecordMmap2:
			if int(rec.PID) == s.pid && rec.Executable() {
				s.mapsMoved = true
			}
		case RecordFork:
			if int(rec.PID) == s.pid {
				s.covered[int(rec.TID)] = true
			}
		case RecordThrottle:
			s.stats.Throttled++
		}
	}
	if end < len(s.pending) {
		s.keep(s.pending[end+1:])
	}
	for _, r := range s.rings {
		if r != nil {
			r.ring.Release()
		}
	}
	return end < len(s.pending)
}

// keep copies records into s.carry, with the bytes they point to, which
// lie in the rings (or in the previous carry's buffer).
func (s *Source) keep(recs []pending) {
	n := 0
	for i := range recs {
		r := &recs[i].rec
		n += len(r.Stack) + len(r.Comm) + len(r.Filename)
	}
	buf := make([]byte, 0, n)
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	s.carry = append(s.carry[:0], recs...)
	for i := range s.carry {
		r := &s.carry[i].rec
		r.Stack, r.Comm, r.Filename = clone(r.Stack), clone(r.Comm), clone(r.Filename)
	}
}

func (s *Source) fillSample(rec *Record) error {
	sm := &s.sample
	*sm = backend.Sample{TID: int(rec.TID)}
	switch rec.RegsABI {
	case unix.PERF_SAMPLE_REGS_ABI_64:
	case unix.PERF_SAMPLE_REGS_ABI_NONE:
		return fmt.Errorf("perfevent: thread %d: sample without user registers", rec.TID)
	default:
		return fmt.Errorf("perfevent: thread %d: sample of a 32-bit task (regs ABI %d)", rec.TID, rec.RegsABI)
	}
	if err := s.layout.Fill(rec.Regs[:rec.NumRegs], &sm.Regs); err != nil {
		return err
	}
	sm.StackAddr = sm.Regs.SP()
	sm.Stack = rec.Stack
	sm.Weight = time.Duration(rec.Period)
	sm.Time = s.wall.Add(time.Duration(int64(rec.Time) - s.mono))
	sm.MapsChanged = s.mapsMoved
	s.mapsMoved = false
	return nil
}
