package ptracesampler

import (
	"errors"
	"math/bits"
	"slices"

	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
)

// Which threads ran since the previous tick.
//
// A tick's work must grow with the threads that run, not with the threads
// that exist: a server with a thousand pooled threads and two busy ones
// should cost about what a two-thread program costs. So the back end touches
// a thread only when it is due for a reading (checkWheel), an idle thread's
// readings back off (maxCheckInterval), and the run ledger proves idle
// threads idle without reading them at all (runLedger). Only a change of
// the thread list, and --idle's reuse of every idle thread's last stack,
// walk every thread.

// threadState is what the back end remembers of one thread between ticks.
type threadState struct {
	tid int
	// procRuns' files: nil stat reads /proc/PID/task/TID/stat instead;
	// state is opened while the thread is busy (see running).
	stat    *procmaps.SchedstatFile
	state   *procmaps.StatFile
	last    procmaps.Schedstat
	hasLast bool
	// This tick's reading, before it is judged (the ledger's window may
	// take it more than once).
	cur   procmaps.Schedstat
	curOK bool
	// The run the back end's last stop of the thread will show in its
	// schedstat, not yet seen (see ranSince).
	owedSlices, owedNS uint64
	// credit is the CPU time (ns) the thread used since its last sample,
	// less what earlier samples' rounding already counted (weight.go).
	credit  int64
	fresh   int64 // CPU time (ns) charged since the last decision
	rate    int64 // smoothed CPU time (ns) per decision
	hasRate bool
	weight  int64 // of this tick's sample, decided by onCPU
	// The state read at stateTick: running or runnable (runningAt), and
	// the thread's state letter then.
	stateTick    int64
	stateRunning bool
	stateLetter  byte
	// blocked is the state the thread was last found waiting in, for its
	// wall-clock samples while it does not run (Unchanged ones).
	blocked profile.ThreadState
	// modes is the thread's CPU time by mode, and lands where its stops
	// landed, for place (weight.go).
	modes cpuModes
	lands landings
	// sampled: the thread was yielded with a stack since the last exec,
	// so under Idle a tick it did not run can yield it Unchanged.
	sampled bool
	// stack is what its walks needed of its stack beyond the window
	// (stacks.go): its next copies reach that far.
	stack learned
	// Back-off of idle threads: after idleChecks consecutive readings that
	// showed no run, schedstat is read again only at tick nextCheck.
	idleChecks int
	nextCheck  int64
	readTick   int64 // tick of the last reading
	ranTick    int64 // last tick at which the thread was found to have run
	listed     int64 // the back end's listGen when last listed
	gone       bool  // dropped: the wheel forgets it
}

// maxCheckInterval is the longest gap, in ticks, between two readings of an
// idle thread's schedstat. Reading it costs a system call per thread; the
// price of reading less often is that a thread that starts running after a
// long sleep is noticed up to this many ticks late (those ticks miss its
// samples), unless the run ledger proved every tick since quiet.
const maxCheckInterval = 16

// backOff schedules th's next schedstat reading: at the next tick if it
// ran; after the first two idle readings still at the next tick, then
// after 2, 4, 8 and from then on maxCheckInterval ticks. Those two: a busy
// thread on a loaded machine may miss a tick or two without being idle,
// and a thread that wakes about once a period (a 10 ms timer against 99
// Hz) does; a thread the back end reads at every tick stays inside the run
// ledger's window, where its runs do not cost the ledger its proof.
func (th *threadState) backOff(tick int64, ran bool) {
	if ran {
		th.idleChecks, th.nextCheck = 0, tick+1
		return
	}
	th.idleChecks = min(th.idleChecks+1, idleSteadyChecks)
	th.nextCheck = tick + min(int64(1)<<max(th.idleChecks-2, 0), maxCheckInterval)
}

// idleSteadyChecks is where backOff's idle count stops: from then on the
// interval is maxCheckInterval.
var idleSteadyChecks = bits.Len(maxCheckInterval) + 1

// checkWheel files each thread under the tick of its next reading, so that
// a tick finds the threads due without looking at the others. A thread is
// filed at most maxCheckInterval ticks ahead, so one slot per tick of that
// span suffices; each thread is in exactly one slot.
type checkWheel [maxCheckInterval + 1][]*threadState

func (w *checkWheel) add(th *threadState) {
	i := th.nextCheck % int64(len(w))
	w[i] = append(w[i], th)
}

// take appends the threads due at tick to into and empties their slot.
func (w *checkWheel) take(tick int64, into []*threadState) []*threadState {
	i := tick % int64(len(w))
	into = append(into, w[i]...)
	clear(w[i])
	w[i] = w[i][:0]
	return into
}

// checkThreads reads the threads due at tick and returns, in TID order, the
// ones that ran since the previous tick; fresh are the threads listed for
// the first time, which count as having run. Threads read at the previous
// tick (they ran lately) are read inside the ledger's window; idle ones due
// on their back-off schedule are skipped if the ledger proves them idle,
// read otherwise.
func (src *Source) checkThreads(tick int64, fresh []*threadState) []*threadState {
	due := src.wheel.take(tick, src.due[:0])
	window := append(src.window[:0], fresh...)
	idle := src.idle[:0]
	for _, th := range due {
		switch {
		case th.gone:
		case th.readTick == tick-1:
			window = append(window, th)
		default:
			idle = append(idle, th)
		}
	}
	// The first tick reads every thread: too long a window to hold still,
	// and too costly to repeat.
	src.ledger.window(len(window) <= 64, func() {
		for _, th := range window {
			th.cur, th.curOK = src.runs.read(th)
		}
	})
	ran := src.ran[:0]
	unsure := len(fresh) > 0
	read := 0
	for _, th := range window {
		if !th.curOK {
			unsure = true
		} else {
			read++
		}
		if src.judge(th, tick) {
			ran = append(ran, th)
		}
	}
	src.ledger.verdict(tick, unsure, len(src.order), read)
	for _, th := range idle {
		if src.ledger.knownIdle(th.readTick) {
			// As if read and found idle: the schedule backs off further.
			th.backOff(tick, false)
			src.wheel.add(th)
			continue
		}
		th.cur, th.curOK = src.runs.read(th)

		if src.judge(th, tick) {
			ran = append(ran, th)
		}
	}
	src.ledger.settle()
	slices.SortFunc(ran, func(a, b *threadState) int { return a.tid - b.tid })
	clear(due)
	src.due, src.window, src.idle, src.ran = due[:0], window[:0], idle[:0], ran
	return ran
}

// judge decides from th's reading whether it ran since its previous one,
// records the reading and schedules the next. A thread that could not be
// read (it exited since the listing) is treated as idle until the list
// drops it.
func (src *Source) judge(th *threadState, tick int64) (ran bool) {
	if !th.curOK {
		th.backOff(tick, false)
		src.wheel.add(th)
		return false
	}
	cur := th.cur
	ran = !th.hasLast || src.ranSince(th, cur)
	if !ran && th.idleChecks == 0 {
		// It ran at its last reading: unchanged counters may only mean
		// it kept its CPU since (they move when it leaves one, or at a
		// scheduler tick). At 999 Hz a CPU-bound thread was judged idle
		// at a quarter of the ticks before this check.
		ran = src.runningAt(th, tick)
	}
	src.ledger.record(th.last.RunNS, cur.RunNS)
	switch {
	case th.hasLast:
		src.charge(th, th.last.RunNS, cur.RunNS)
	case tick > 0:
		// Listed after the first tick: all it ran is since the start.
		src.charge(th, 0, cur.RunNS)
	}
	th.last, th.hasLast, th.readTick = cur, true, tick
	th.backOff(tick, ran)
	src.wheel.add(th)
	if ran {
		th.ranTick = tick
	} else if th.idleChecks == idleSteadyChecks {
		src.runs.idle(th)
	}
	return ran
}

// ranSince reports whether th ran since its previous reading, not
// counting what the back end's own last stop of it still owes (afterStop).
func (src *Source) ranSince(th *threadState, cur procmaps.Schedstat) bool {
	if cur.RunNS == th.last.RunNS && cur.Timeslices == th.last.Timeslices {
		return false
	}
	dSlices, dNS := cur.Timeslices-th.last.Timeslices, cur.RunNS-th.last.RunNS
	if dSlices <= th.owedSlices && dNS <= th.owedNS {
		// The resume may be scheduled well after the next tick on a busy
		// machine, so the allowance lasts until it is used up.
		th.owedSlices -= dSlices
		th.owedNS -= dNS
		return false
	}
	th.owedSlices, th.owedNS = 0, 0
	return true
}

// afterBatch runs on the tracer thread once the batch resumed its last
// thread (ptrace.BatchOptions.OthersStill). It reads every stopped thread
// again, and reports whether the process's CPU clock proves that no other
// thread ran since this tick's ledger window: then none can have entered
// a ptrace stop the batch would have to look for.
//
// The reading after the stop matters on its own. A stop puts a sleeping
// thread on a CPU twice: to enter the ptrace stop, then to restart its
// system call after the resume. The first is accounted by now (the thread
// left its CPU to stop), so this reading leaves only the restart to be
// excused at the next one. Excusing both with a fixed allowance instead
// was wrong both ways on a noisy VM: entering a stop alone sometimes took
// 650 µs of CPU (a sleeping thread then looked busy and was stopped again),
// while a light thread's own work hid under a generous allowance.
func (src *Source) afterBatch(tick int64, batch []*threadState, results []stackResult) (othersStill bool) {
	var ran uint64 // what the batch's threads ran since their readings at this tick
	exact := true
	for i, th := range batch {
		if !results[i].done || results[i].err != nil {
			exact = exact && !results[i].done // not sampled: not stopped
			continue
		}
		th.owedSlices, th.owedNS = restartSlices, restartNS
		cur, ok := src.runs.read(th)
		if !ok {
			exact = false
			continue
		}
		// Only a reading of this tick's says what the thread ran since
		// the window; an older one would count runs from before it.
		exact = exact && th.readTick == tick
		ran += cur.RunNS - th.last.RunNS
		// What ran until the stop is the sample's; the next tick judges
		// from here.
		src.ledger.record(th.last.RunNS, cur.RunNS)
		src.charge(th, th.last.RunNS, cur.RunNS)
		th.last = cur
	}
	return exact && src.ledger.stillBut(ran)
}

// What the restart of a system call after a resume may cost: one trip onto
// a CPU, some microseconds. Kept tight: a light thread's own runs right
// after a sample must not pass for it (a thread waking every 10 ms for
// 50 µs was judged idle, then left and re-entered the ledger's window
// each time, costing the ledger its proofs).
const (
	restartSlices = 1
	restartNS     = 100_000
)

// runSource is where the back end learns what ran: /proc and the process
// CPU clock for a live target (procRuns), a model in tests.
type runSource interface {
	// open prepares reading th; false if its readings will not be run
	// time in nanoseconds (the run ledger then proves nothing).
	open(th *threadState) bool
	read(th *threadState) (procmaps.Schedstat, bool)
	close(th *threadState)
	// state reads th's stat line now.
	state(th *threadState) (runState, bool)
	// idle tells that th went idle for good: what only busy threads need
	// can go.
	idle(th *threadState)
	// process returns the run time of the whole process, in ns.
	process() (uint64, error)
	// done releases what the source holds.
	done()
}

// procRuns reads a live process's threads.
type procRuns struct {
	pid   int
	clock *procmaps.ProcessClock // nil: process fails, the ledger is off
}

func newProcRuns(pid int) *procRuns {
	r := &procRuns{pid: pid}
	r.clock, _ = procmaps.OpenProcessClock(pid)
	return r
}

func (r *procRuns) open(th *threadState) bool {
	f, err := procmaps.OpenSchedstat(r.pid, th.tid)
	if err != nil {
		return false // stat's tick counts stand in (read)
	}
	th.stat = f
	return true
}

// read reads th's CPU time; without its schedstat file, the stat tick
// counts stand in.
func (r *procRuns) read(th *threadState) (procmaps.Schedstat, bool) {
	if th.stat != nil {
		ss, err := th.stat.Read()
		return ss, err == nil
	}
	info, err := procmaps.ReadThreadInfo(r.pid, th.tid)
	if err != nil {
		return procmaps.Schedstat{}, false
	}
	if info.HasSched {
		return info.Sched, true
	}
	// Ticks as run time, in nanoseconds at the usual USER_HZ of 100, so
	// ranSince's comparison and the on-CPU weights still work.
	return procmaps.Schedstat{RunNS: info.CPUTicks() * 10_000_000}, true
}

func (r *procRuns) close(th *threadState) {
	if th.stat != nil {
		th.stat.Close()
		th.stat = nil
	}
	r.idle(th)
}

// state reads the thread's stat file, kept open while the thread is busy:
// the back end asks at most ticks of a busy thread, and opening the file
// each time cost several times the read.
func (r *procRuns) state(th *threadState) (runState, bool) {
	if th.state == nil {
		f, err := procmaps.OpenStat(r.pid, th.tid)
		if err != nil {
			return runState{}, false
		}
		th.state = f
	}
	st, err := th.state.Read()
	if err != nil {
		return runState{}, false
	}
	return runState{running: st.State == 'R', letter: st.State, user: st.UTime, system: st.STime}, true
}

func (r *procRuns) idle(th *threadState) {
	if th.state != nil {
		th.state.Close()
		th.state = nil
	}
}

func (r *procRuns) process() (uint64, error) {
	if r.clock == nil {
		return 0, errNoClock
	}
	return r.clock.RunNS()
}

func (r *procRuns) done() {
	if r.clock != nil {
		r.clock.Close()
	}
}

var errNoClock = errors.New("no process CPU clock")

// reconcile brings the back end's threads in line with the tracer's list when
// that changed, and returns the threads listed for the first time.
// ptrace.Process.Threads returns the same slice until a thread comes or
// goes, so a tick without such a change costs one comparison.
func (src *Source) reconcile(tids []int) (fresh []*threadState) {
	if len(tids) == len(src.listed) && len(tids) > 0 && &tids[0] == &src.listed[0] {
		return nil
	}
	src.listed = tids
	src.listGen++
	fresh = src.fresh[:0]
	order := src.order[:0]
	for _, tid := range tids {
		if src.only != nil && !src.only[tid] {
			continue
		}
		th := src.threads[tid]
		if th == nil {
			th = src.newThread(tid)
			src.threads[tid] = th
			fresh = append(fresh, th)
		}
		th.listed = src.listGen
		order = append(order, th)
	}
	for tid, th := range src.threads {
		if th.listed != src.listGen {
			src.dropThread(th)
			src.ledger.forget(th.readTick)
			delete(src.threads, tid)
		}
	}
	src.order, src.fresh = order, fresh
	return fresh
}

// newThread sets up a thread listed for the first time. Its name is read
// when it is first sampled.
func (src *Source) newThread(tid int) *threadState {
	th := &threadState{tid: tid}
	if !src.runs.open(th) {
		src.ledger.off = true
	}
	return th
}

func (src *Source) dropThread(th *threadState) {
	th.gone = true
	src.runs.close(th)
}

func (src *Source) closeThreads() {
	for _, th := range src.threads {
		src.dropThread(th)
	}
	src.runs.done()
}
