//go:build linux

package ptrace

// Sliding batches (BatchOptions.Overlap): the tracer thread runs window
// after window in one trip while the caller handles the samples of the
// windows before.

import (
	"errors"
	"runtime"
	"time"
)

// A slide is SampleBatch with Overlap: the tracer thread runs window
// after window in one trip, and hands each window's samples to the
// caller through a channel while it goes on with the next; each walks
// them meanwhile. The windows slide (runWindow carries the threads still
// in flight into the next window), so the tracer never waits for a
// window's slowest thread before it interrupts more. Two slot sets
// alternate: the tracer starts a window only once the caller is done
// with the window before the last (whose set it reuses), and waits for
// that with no thread held (a window that cannot carry its flights ends
// when they stopped). The caller's progress reaches the tracer without
// a round trip through the Go scheduler: a carried thread stays stopped
// (or interrupted) only while the tracer itself works.
type slideDelivery struct {
	ready []readySample
	w     int64 // window number
	end   bool  // the trip ended: no delivery follows
}

// slideYieldEvery is how long a slide runs on before it lets the Go
// scheduler have its goroutine, at a window that carried no thread: once
// the yield is due, the window starts no more threads and ends when those
// in flight stopped and were sampled. A goroutine that runs 10 ms without
// a scheduling point is preempted by Go's sysmon, wherever it is: a
// slide's tracer was, in the middle of windows, with up to 16 threads
// stopped, and got its thread back only once another of the program's
// threads got a CPU to hand it over, which under 4 spinning threads on 2
// CPUs took 2-9 ms (runtime and kernel traces of 1,000-thread dumps: 1 to
// 3 dumps in 100 held a thread stopped that long). Yielding where no
// thread waits moves that wait to where it stops nothing. (A window whose
// last threads are slow to stop can still run past sysmon's 10 ms.)
var slideYieldEvery = 6 * time.Millisecond // (a variable for tests)

// yieldDue reports whether a slide should end its window without carrying
// threads in flight, and then yield.
func (r *batchRun) yieldDue(now time.Time) bool {
	return r.carries() && now.Sub(r.yielded) >= slideYieldEvery
}

// slideWaitMax bounds the tracer's wait for the caller within one trip:
// past it the trip ends and the caller starts another. Only an each that
// calls the Tracer (which it must not, with Overlap) waits that long.
const slideWaitMax = 50 * time.Millisecond

func (p *Process) slideBatch(r *batchRun, lastDrain func() bool, each func(i int, s *Sample, err error) bool) error {
	r.freed = make(chan struct{}, 1)
	// At most two windows wait for the caller (the tracer starts window
	// w+1 only once w-1 was consumed), then the trip's end.
	deliveries := make(chan slideDelivery, 4)
	trip := func() {
		p.tr.stopBatch(func() {
			defer func() {
				p.dropFlights() // aborted, or ended while carrying
				deliveries <- slideDelivery{end: true}
			}()
			p.slide(r, deliveries)
		}, lastDrain)
	}
	wait, err := p.tr.submit(trip)
	if err != nil {
		return err
	}
	// ended collects the trip's end; a panic on the tracer thread is
	// raised here, once.
	ended := func() error {
		w := wait
		wait = nil
		return w()
	}
	finish := func() error {
		// Ends the trip under way (if any): the tracer stops starting
		// threads, lets go of those in flight, and says so.
		if wait == nil {
			return nil
		}
		r.abort.Store(true)
		r.poke()
		for d := range deliveries {
			if d.end {
				break
			}
		}
		return ended()
	}
	defer finish() // each panicked
	for {
		d := <-deliveries
		if d.end {
			if err := ended(); err != nil || r.done {
				return err
			}
			// The tracer waited too long for us: another trip.
			if wait, err = p.tr.submit(trip); err != nil {
				return err
			}
			continue
		}
		for _, x := range d.ready {
			if !each(x.i, x.s, x.err) || errors.Is(x.err, ErrProcessExited) {
				err := finish()
				if !r.done && r.o.OthersStill != nil {
					r.done = true // its drain was not waived: OthersStill is asked all the same
				}
				return err
			}
		}
		r.consumed.Store(d.w)
		r.poke()
	}
}

// poke tells a tracer waiting in slide that the caller got on.
func (r *batchRun) poke() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// slide runs one trip of a slide on the tracer thread: windows until the
// batch is done, aborted, or the caller lags for slideWaitMax. The trip
// runs under SCHED_FIFO (where allowed) from window to window, carried
// threads included, and at its normal policy while it waits for the
// caller, when no thread is held.
func (p *Process) slide(r *batchRun, deliveries chan<- slideDelivery) {
	t := p.tr
	rt := t.enterRealtime()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if rt {
			t.leaveRealtime()
		}
	}()
	for {
		r.window++
		ready := p.runWindow(r)
		deliveries <- slideDelivery{ready: ready, w: r.window}
		if r.done || r.abort.Load() {
			return
		}
		if len(p.flights) == 0 && !p.frozen && r.yieldDue(time.Now()) {
			// No thread stopped or about to stop: the Go scheduler may
			// take this goroutine off its thread now (see
			// slideYieldEvery) rather than in the middle of a window.
			runtime.Gosched()
			r.yielded = time.Now()
			t.batch.yields++
			t.drain() // stops of threads outside the batch that came meanwhile
		}
		// The next window reuses the slots of the window before this
		// one. (runWindow carried threads only if they were free.)
		if r.nextSetFree() {
			continue
		}
		if len(p.flights) > 0 {
			panic("ptrace: a window carried its threads in flight into slots the caller reads")
		}
		if rt {
			t.leaveRealtime()
			rt = false
		}
		waitFrom := time.Now()
		for !r.nextSetFree() && !r.abort.Load() {
			if time.Since(waitFrom) > slideWaitMax {
				return
			}
			if timer == nil {
				timer = time.NewTimer(t.batchDrainGap())
			} else {
				timer.Reset(t.batchDrainGap())
			}
			select {
			case <-r.freed:
			case <-timer.C:
				t.drain() // signals to deliver wait for no window
			}
		}
		if r.abort.Load() {
			return
		}
		r.yielded = time.Now() // (waiting was a scheduling point)
		rt = t.enterRealtime()
	}
}
