//go:build linux

package ptrace

// Polling the threads in flight: a wait4 of each (pollFlights) or one for
// any tracee (pollAny), sampling each thread that stopped, and asking
// /proc about those slow to stop (checkFlights).

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// pollFlights looks once at every thread in flight: a stopped one is
// sampled and resumed, an exited one reported. It reports whether any
// thread stopped or exited.
func (p *Process) pollFlights(window int) (found bool) {
	for j := 0; j < len(p.flights); {
		if p.pollFlight(j, window) {
			found = true
			continue
		}
		j++
	}
	return found
}

// pollFlight looks once at the thread in flight j; if it stopped (it is
// sampled and resumed) or exited, it reports true and the last flight
// takes place j.
func (p *Process) pollFlight(j, window int) bool {
	r, done := p.pollOne(&p.flights[j], window)
	if done {
		p.land(j, r)
	}
	return done
}

// land ends the flight j with r: r waits for the caller, and the last
// flight takes place j.
func (p *Process) land(j int, r readySample) {
	p.flights[j].th.inFlight = false
	p.batch.ready = append(p.batch.ready, r)
	last := len(p.flights) - 1
	p.flights[j] = p.flights[last]
	p.flights = p.flights[:last]
}

// pollOne checks one thread in flight without blocking.
func (p *Process) pollOne(f *flight, window int) (readySample, bool) {
	th := f.th
	if p.tr.threads[th.tid] != th {
		return readySample{i: f.i, err: ErrThreadExited}, true // dropped by an exec in another thread
	}
	if th.state != stateHeld {
		before := time.Now()
		wpid, ws, err := wait4NoHang(th.tid)
		switch {
		case err == unix.ECHILD:
			return readySample{i: f.i, err: p.gone(th)}, true
		case err != nil || wpid != th.tid:
			f.seen = before
			return readySample{}, false
		}
		return p.flightStatus(f, ws, before, window)
	}
	return p.takeSample(f, window), true
}

// flightStatus applies the wait status ws of the thread in flight f,
// which a poll begun at before collected: a stop is sampled (done); an
// exit is its error (done).
func (p *Process) flightStatus(f *flight, ws unix.WaitStatus, before time.Time, window int) (readySample, bool) {
	held, err := p.onStatus(f.th, ws, true)
	if err != nil {
		return readySample{i: f.i, err: err}, true
	}
	if !held {
		f.seen = before
		return readySample{}, false
	}
	return p.takeSample(f, window), true
}

// takeSample samples the held thread of flight f and lets it go.
func (p *Process) takeSample(f *flight, window int) readySample {
	th := f.th
	s := p.batch.take()
	err := p.read(th, s, window, 0, &p.batch)
	p.letGo(th)
	now := time.Now()
	// The stop came after the last poll that found none: from there to
	// the resume is an upper bound of the time the thread stood still.
	s.Stopped, s.Total = now.Sub(f.seen), now.Sub(f.t0)
	if err != nil {
		p.batch.free = append(p.batch.free, s)
		s = nil
	}
	return readySample{i: f.i, s: s, err: err}
}

// Polling a small tracee set.
//
// pollFlights asks each thread in flight with a wait4 of its TID: a wait
// for any tracee walks every tracee of the tracer thread in the kernel,
// 9-11 µs with a thousand. A lazy Process (AttachLazy) has no thousand:
// its tracees are the main thread and the threads in flight, each
// released at its sample. There one wait for any tracee (pollAny) answers
// for every flight at once, where most per-flight polls found nothing
// (about 12 of every 16 in a 1,000-thread dump).

// anyWaitMax is the most tracees (of the whole tracer thread) for which
// a poll round waits for any tracee (pollAny) instead of each flight's.
const anyWaitMax = 4 * slideInFlight

// anyWait reports whether this poll round may use pollAny.
func (p *Process) anyWait() bool {
	return p.lazy && len(p.tr.threads)+len(p.tr.leftTraced) <= anyWaitMax
}

// poll is one poll round over the threads in flight: pollAny where the
// tracee set is small (anyWait), else pollFlights. drained reports that
// every pending event of the tracer's tracees was handled, as a drain
// would.
func (p *Process) poll(window int) (found, drained bool) {
	if p.anyWait() {
		return p.pollAny(window)
	}
	return p.pollFlights(window), false
}

// pollAny is a poll round of one wait for any tracee: it consumes every
// pending event of the tracer thread's tracees (t.next, which never
// consumes a child's exit), samples each thread in flight that
// stopped, and hands every other event to dispatch, exactly as a drain
// would (the main thread's group-stop, a signal to deliver, an exit, an
// auto-attached thread). A flight that can answer without a wait (held
// by an earlier drain, or dropped by an exec) is answered as pollOne
// would. With a child's event pending it falls back to pollFlights.
func (p *Process) pollAny(window int) (found, drained bool) {
	t := p.tr
	t.batch.anyPolls++
	before := time.Now()
	for k := 0; k < anyWaitMax; k++ {
		wpid, ws, stray := t.next(unix.WNOHANG)
		if stray {
			return p.pollFlights(window) || found, false
		}
		if wpid <= 0 {
			break
		}
		j := p.flightOf(wpid)
		if j < 0 {
			t.dispatch(wpid, ws)
			continue
		}
		if r, done := p.flightStatus(&p.flights[j], ws, before, window); done {
			p.land(j, r)
			found = true
		}
	}
	for j := 0; j < len(p.flights); {
		f := &p.flights[j]
		if t.threads[f.th.tid] == f.th && f.th.state != stateHeld {
			f.seen = before
			j++
			continue
		}
		r, _ := p.pollOne(f, window) // no wait: it answers at once
		p.land(j, r)
		found = true
	}
	return found, true
}

// flightOf returns the index of the flight of thread tid, or -1.
func (p *Process) flightOf(tid int) int {
	for j := range p.flights {
		if p.flights[j].th.tid == tid {
			return j
		}
	}
	return -1
}

// checkFlights asks /proc about threads in flight that have not stopped
// for a while: one in an uninterruptible sleep for blockedGrace is given
// up (ErrThreadBlocked, as waitUninterruptible does), a main thread gone
// zombie (it called pthread_exit) never stops and has exited.
func (p *Process) checkFlights(now time.Time) {
	b := &p.batch
	for j := 0; j < len(p.flights); {
		f := &p.flights[j]
		if now.Sub(f.checked) < stateCheckGap {
			j++
			continue
		}
		f.checked = now
		st, err := procmaps.ReadThreadState(p.pid, f.th.tid)
		var r readySample
		switch {
		case err != nil:
			j++
			continue // the poll finds its exit
		case st == 'Z' || st == 'X':
			if f.th.tid != p.pid {
				j++
				continue // its exit is reported to us
			}
			p.leaderZombie = true
			p.forget(f.th)
			r = readySample{i: f.i, err: ErrThreadExited}
		case st == 'D':
			if f.inD.IsZero() {
				f.inD = now
			}
			if now.Sub(f.inD) < blockedGrace {
				j++
				continue
			}
			f.th.blocked = true
			r = readySample{i: f.i, err: fmt.Errorf("thread %d: %w", f.th.tid, ErrThreadBlocked)}
		default:
			f.inD = time.Time{}
			j++
			continue
		}
		f.th.inFlight = false
		b.ready = append(b.ready, r)
		last := len(p.flights) - 1
		p.flights[j] = p.flights[last]
		p.flights = p.flights[:last]
	}
}
