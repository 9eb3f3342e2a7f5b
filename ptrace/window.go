//go:build linux

package ptrace

// One window of a batch (runWindow): interrupting its threads, starting
// each thread's sample, and giving up what is still in flight when the
// window ends early.

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// runWindow interrupts the next window of r's threads at once, samples
// and resumes each as it stops, and returns the window's samples (in
// p.batch's slots, valid until the next window).
//
// Without Overlap a window ends once no thread of it is in flight: the
// caller's each then runs while no thread of the batch is stopped or
// interrupted. With Overlap the window slides: whenever a thread of it
// was sampled, the next thread of the batch is interrupted, so that up to
// window threads are always on their way to a stop, and the window ends
// as soon as it holds window samples; the threads still in flight are
// carried into the next window, which the caller starts at once. A
// window that waits for its slowest thread (a sleeper woken behind busy
// threads on a contended CPU: milliseconds) leaves the tracer idle while
// the rest of the batch waits; sliding keeps every slot at work. Each
// slot set then holds twice the window (carried threads stop into the
// next set).
func (p *Process) runWindow(r *batchRun) []readySample {
	t := p.tr
	p.batch, p.spare = p.spare, p.batch // the caller may still read the last window's
	b := &p.batch
	tids, o := r.tids, r.o
	n := max(o.StackWindow, 0)
	window, slots := batchWindow, batchWindow
	if r.carries() {
		window, slots = slideInFlight, 2*slideInFlight
	}
	if n > 0 {
		slots = min(slots, max(batchBytes/n, 1))
		window = min(window, slots)
	}
	slots = min(slots, max(len(tids)-r.next+len(p.flights), 1))
	b.prepare(slots, n, o)
	if r.carries() && r.window == 1 && len(tids) > slots {
		// Threads in flight stop into the next window's slots: they
		// must be there before any stop, like this window's. (Only now:
		// later, the caller reads the other set's samples. Slots never
		// grow within a batch.)
		p.spare.prepare(slots, n, o)
	}
	b.free = append(b.free[:0], b.slots[:slots]...)
	b.ready = b.ready[:0]
	b.arenaUsed = 0
	t.batch.running, t.batch.release = true, o.Release
	rt := t.enterRealtime()
	carried := false
	defer func() {
		if rt {
			t.leaveRealtime()
		}
		t.batch.running, t.batch.release = false, false
		if !carried {
			// Whatever ended the window, no thread stays held for it: a
			// stop still to come is resumed by a drain.
			p.dropFlights()
		}
		r.done = r.next >= len(tids) && len(p.flights) == 0
	}()
	// canStart: a slot for every thread in flight and every sample taken.
	canStart := func() bool {
		if r.carries() {
			if len(b.ready) > 0 && r.yieldDue(time.Now()) {
				return false // the window only lets its flights stop: a yield follows
			}
			return len(p.flights) < window && len(p.flights)+len(b.ready) < slots
		}
		return len(p.flights)+len(b.ready) < window
	}
	start := func() {
		// Never past the deadline or after Cancel: an interrupt then
		// stops a thread for a sample that is not taken, and its pause
		// goes uncounted; the expiry below reports the rest not taken.
		started := 0
		for r.next < len(tids) && canStart() && !p.expired(r, time.Now()) {
			i := r.next
			r.next++
			if x, ok := p.startSample(i, tids[i], n); ok {
				b.ready = append(b.ready, x)
				continue
			}
			// A sleeping thread woken by the interrupt on this CPU runs
			// first and is often stopped by now: take it at once, not
			// once the rest of the window was interrupted (which held it
			// stopped for that long, a few hundred µs). Threads woken on
			// another CPU stop there meanwhile: every few interrupts,
			// all are polled.
			switch started++; {
			case p.anyWait():
				p.pollAny(n) // one wait answers for every flight
			case started%startPollEvery == 0:
				p.pollFlights(n)
			default:
				p.pollFlight(len(p.flights)-1, n)
			}
		}
	}
	start()
	lastDrain := time.Now()
	lastEach := lastDrain
	gap := t.batchDrainGap()
	idle := 0
	var idleFrom time.Time
	for {
		found, drained := p.poll(n)
		if drained {
			// A round of pollAny handled every tracee's events: no drain
			// is due. (Every stateCheckGap each flight is still asked on
			// its own, in case a thread left the tracee list without a
			// status: cheap, and pollOne's ECHILD then tells.)
			if lastDrain = time.Now(); lastDrain.Sub(lastEach) >= stateCheckGap {
				lastEach = lastDrain
				found = p.pollFlights(n) || found
			}
		}
		if r.carries() && len(b.ready) >= window && len(p.flights) > 0 && r.nextSetFree() && !r.yieldDue(time.Now()) {
			// The next window follows at once, on this thread: the
			// threads in flight stop into it. (While the caller still
			// reads the samples of the window before, whose slots the
			// next one reuses, this window takes no new threads once
			// its slots are spoken for, and ends when its flights did:
			// no thread is held while the tracer waits for the caller.)
			carried = true
			t.batch.carried++
			return b.ready
		}
		if found {
			idle = 0
			if start(); len(p.flights) > 0 {
				continue
			}
		}
		if len(p.flights) == 0 {
			if start(); len(p.flights) > 0 {
				continue
			}
			if len(b.ready) == 0 && r.next < len(tids) {
				// Nothing started (the deadline passed): the rest is
				// not taken.
				for ; r.next < len(tids); r.next++ {
					b.ready = append(b.ready, readySample{i: r.next, err: ErrNotTaken})
				}
			}
			return b.ready
		}
		now := time.Now()
		if p.expired(r, now) {
			// Take what stopped meanwhile; what is still in flight is not
			// taken: it stays interrupted but runs on, and so does every
			// thread not started.
			p.poll(n)
			for _, f := range p.flights {
				f.th.inFlight = false
				if f.th.state == stateHeld && !p.frozen { // stopped since the last poll
					p.resume(f.th)
				}
				b.ready = append(b.ready, readySample{i: f.i, err: ErrNotTaken})
			}
			p.flights = p.flights[:0]
			for ; r.next < len(tids); r.next++ {
				b.ready = append(b.ready, readySample{i: r.next, err: ErrNotTaken})
			}
			return b.ready
		}
		if now.Sub(lastDrain) >= gap {
			t.drain()
			lastDrain = now
			continue
		}
		p.checkFlights(now)
		if idle == 0 {
			idleFrom = now
		}
		idle++
		switch {
		case t.realtime && !t.realtimeDenied && multiCPU && !r.carries() && now.Sub(idleFrom) < fifoSpin:
			// Poll on for a moment: a thread running on another CPU
			// stops within microseconds of its interrupt, and a sleep
			// costs this VM tens of µs to wake from (a quiet machine's
			// record paused each thread 64 µs instead of 20). No yield:
			// under SCHED_FIFO it lets no ordinary thread run, the
			// thread to stop included; the bound is what a thread woken
			// on this CPU waits at most for it. Not in a dump's slide:
			// most of its threads sleep, and each must run, most often
			// on whichever CPU is free, to reach its stop (spinning
			// there, a 1,000-thread dump took 114 ms instead of 91).
		case t.spin && !t.realtime && idle < 64:
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		default:
			// Raw: through the Go scheduler, a sleep longer than sysmon's
			// 20 µs hands this thread's P to another goroutine, and with
			// one P (record, top) the tracer then waits for it after
			// every sleep while threads it stopped wait for the tracer:
			// with line tables loading in the background, ticks took
			// 0.6 s and a thread stayed stopped 1.4 s.
			ts := unix.NsecToTimespec(int64(batchPollSleep))
			unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		}
	}
}

// dropFlights gives up the threads in flight, on the tracer thread: a
// batch that ends early (each returned false, a panic, the deadline)
// leaves none held. One already stopped is resumed (unless frozen); one
// whose stop is still to come is resumed by a drain, like any stop
// nobody waits for.
func (p *Process) dropFlights() {
	for _, f := range p.flights {
		f.th.inFlight = false
		if f.th.state == stateHeld && !p.frozen {
			p.resume(f.th)
		}
	}
	p.flights = p.flights[:0]
}

func (p *Process) expired(r *batchRun, now time.Time) bool {
	o := r.o
	if r.abort.Load() {
		return true
	}
	if !o.Deadline.IsZero() && !now.Before(o.Deadline) {
		return true
	}
	if o.Cancel != nil {
		select {
		case <-o.Cancel:
			return true
		default:
		}
	}
	return false
}

// startSample begins the sample of thread tid (index i): an error or a
// sample at once (ok), or an interrupt and a flight.
func (p *Process) startSample(i, tid, window int) (r readySample, ok bool) {
	b := &p.batch
	if err := p.usable(); err != nil {
		return readySample{i: i, err: err}, true
	}
	th := p.threads[tid]
	if th == nil && p.lazy && !p.released[tid] {
		// Lazy: seized here, right before its interrupt (a thread that
		// was released is not seized again: ErrDetached, as without).
		var err error
		if th, err = p.seizeLazy(tid); err != nil {
			return readySample{i: i, err: err}, true
		}
	}
	if th == nil || (tid == p.pid && p.leaderZombie) {
		return readySample{i: i, err: p.notTraced(tid)}, true
	}
	now := time.Now()
	if th.state == stateHeld {
		// Stopped already (frozen, or a stop we hold): no interrupt.
		s := b.take()
		err := p.read(th, s, window, 0, b)
		p.letGo(th)
		d := time.Since(now)
		s.Stopped, s.Total = d, d
		if err != nil {
			b.free = append(b.free, s)
			s = nil
		}
		return readySample{i: i, s: s, err: err}, true
	}
	if th.blocked {
		// Found in an uninterruptible sleep by an earlier wait: its
		// interrupt is pending. Still asleep, it answers at once.
		if st, err := procmaps.ReadThreadState(p.pid, tid); err == nil && st == 'D' {
			return readySample{i: i, err: fmt.Errorf("thread %d: %w", tid, ErrThreadBlocked)}, true
		}
		th.blocked = false
	}
	if th.state == stateRunning || th.state == stateListening {
		// ESRCH means the thread is gone: the poll collects its exit.
		ptraceReq(unix.PTRACE_INTERRUPT, tid, 0, 0)
		p.tr.batch.interrupts++
	}
	th.inFlight = true
	p.flights = append(p.flights, flight{i: i, th: th, t0: now, seen: now, checked: now})
	return readySample{}, false
}

// letGo ends the stop of a sampled thread: nothing while frozen, a
// release in a Release batch, else a resume.
func (p *Process) letGo(th *thread) {
	switch {
	case p.frozen:
	case p.tr.batch.release:
		p.release(th)
	default:
		p.resume(th)
	}
}
