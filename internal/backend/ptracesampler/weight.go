package ptracesampler

import (
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// On-CPU samples: CPU time, charged where it was spent.
//
// An on-CPU profile answers one question: where did the CPU go, per
// function. Two things decide it: how much CPU time each sample stands for
// (its weight), and at which stack it is counted.
//
// # Where: only a thread running at the tick
//
// A thread that ran since the previous tick may be asleep by the tick: a
// thread that spins 5 ms and sleeps 15 ms is, at most ticks, in nanosleep.
// Its CPU time was spent in the spin, so a sample of its sleeping stack
// must not carry it. (This back end once weighed every thread that ran and
// charged the weight to whatever stack the tick found: measured against
// the perf back end, 60% of such a thread's CPU sat on __nanosleep.)
//
// So a thread gets a sample only if it is running at the tick, known in
// three steps, cheapest first (and a fourth, below place, for stops that
// land at a system call's exit):
//
//  1. It ran since the previous tick (checkThreads: its schedstat moved,
//     or the run ledger could not prove it idle). The others cost nothing.
//  2. Its state in /proc/PID/task/TID/stat, read at the tick, is R
//     (running or runnable; runningAt). A thread that woke and slept again
//     since the previous tick (a timer thread waking every 500 µs) is in S
//     and is not stopped.
//  3. At its stop, it is not waiting in the kernel (ptrace.Sample.Asleep:
//     the stop interrupted a blocking system call, or caught one that only
//     waits on its way out, on amd64 and s390x). A thread that went to
//     sleep between step 2 and its stop, or that was found in R only
//     because it was waking from a wait, is not charged; the sample is
//     dropped and counted (Round.Asleep). A thread found waiting at
//     nearly every stop is charged there (placeAsleep).
//
// # How much: the CPU time the thread used
//
// Counting one period per running thread would make the weights depend on
// when stacktop gets a CPU: a sampler that wakes from a timer runs first
// where a CPU is free, so it finds a thread busy on the other CPU less
// often than that thread runs (measured: a thread at 25% was found in R at
// 10% of ticks) and a thread waking from its own timer more often. The
// CPU time a thread used is known exactly instead (schedstat's run time,
// the scheduler's own accounting), so each thread keeps credit, the CPU
// time it used that no sample has counted yet, and a sample of it takes
// its weight from that credit. A thread's weights then add up to its CPU
// time whatever the load, and steps 1-3 decide only at which of its
// stacks that time is counted.
//
// The weight of a sample is decided before the stop: the thread's recent
// CPU time per decision (a moving average) plus a quarter of the credit
// beyond it, rounded at random (whole periods, plus one more with the
// probability of the fraction left). A weight of zero takes no sample and
// does not stop the thread. What is given is taken from the credit, and
// given back if the sample is not taken (past the tick's deadline, failed,
// or found asleep at the stop).
//
// Why an average, not the time since the last decision: schedstat's run
// time of a thread that keeps its CPU moves only at scheduler ticks, so a
// single reading can be a scheduler tick behind, and weights taken from
// single readings follow the scheduler's ticks. For code paced by its own
// CPU time that is also the code's phase: weighting by raw deltas put
// 80% instead of 75% of testdata split's samples in its 3 ms hot phase
// (against a 4 ms scheduler tick), run after run. The average does not
// follow one reading; the credit keeps the total exact.
//
// # The error bound
//
//   - Totals: a thread's weights differ from its CPU time by its credit,
//     which the pull brings back towards one decision's worth; a thread
//     seldom stopped loses what its credit holds beyond maxCredit. So the
//     profile's total is a little under the process's CPU time; the
//     summary shows both.
//   - Where: the CPU time a thread used between samples is charged at
//     its later samples (a smoothed share at each). When the samples land
//     uniformly in its CPU time, a function gets the share of samples it
//     has of the thread's CPU time, plus the sampling noise of any
//     timer-based profiler (sqrt(n·p·(1-p)) of n samples). They do not
//     quite: step 2's R counts a runnable thread waiting for a CPU, so
//     on a loaded machine code just after wake-ups is sampled more; and
//     step 3 removes runs shorter than a stop takes to land, whose CPU
//     then goes to the thread's longer runs (an event loop whose short
//     requests take half its CPU shows them hardly at all, and a fifth
//     of its CPU at its wait, by placeAsleep's rule). The perf back end
//     has neither bias.
//   - Step 2 reads the state some microseconds before the stop; a thread
//     that went to sleep in between is dropped by step 3 and its credit
//     waits for its next sample. On arm64 there is no step 3 nor 4: the
//     kernel prepares a restart before the stop, so its registers no
//     longer tell, and such a sample shows the sleeping stack; s390x tells
//     interrupted calls only.
//
// docs/record.md has the figures against the perf back end.

// maxCredit caps a thread's credit: the CPU time of a thread that is seldom
// stopped is charged at its later samples, but not minutes of it at once
// at the one sample that finally comes. maxCreditPeriods periods, and at
// least minCreditCap at high rates, where a thread woken for short runs
// is stopped only every few dozen of its runs.
func (src *Source) maxCredit() int64 {
	return max(maxCreditPeriods*int64(src.period), int64(minCreditCap))
}

const (
	maxCreditPeriods = 16
	minCreditCap     = 250 * time.Millisecond
)

// onCPU appends to todo the threads of ran that get a sample at this tick,
// those running now (step 2), and decides their weights.
func (src *Source) onCPU(tick int64, ran, todo []*threadState) []*threadState {
	p := int64(src.period)
	for _, th := range ran {
		if !src.runningAt(th, tick) {
			continue // its credit waits for a tick that finds it running
		}
		// The rate follows what the thread ran per decision; the
		// expected weight is that rate plus a share of the credit not
		// yet given, never more than the credit and half a period.
		if th.hasRate {
			th.rate += (th.fresh - th.rate) / rateSmoothing
		} else {
			th.rate, th.hasRate = th.fresh, true
		}
		th.fresh = 0
		want := th.rate + (th.credit-th.rate)/rateSmoothing
		want = min(max(want, 0), max(th.credit, 0)+p/2)
		w := src.roundPeriods(want)
		th.credit -= w * p
		th.weight = w
		if w > 0 {
			todo = append(todo, th)
		}
	}
	return todo
}

// roundPeriods is ns in whole periods, rounded at random: up with the
// probability of the fraction left, so the rounding is unbiased.
func (src *Source) roundPeriods(ns int64) int64 {
	p := int64(src.period)
	if ns <= 0 {
		return 0
	}
	w := ns / p
	if frac := ns - w*p; frac > 0 && src.rng.Int64N(p) < frac {
		w++
	}
	return w
}

// rateSmoothing is the inverse gain of the rate's moving average and of
// the pull of the credit: each decision moves them by a quarter.
const rateSmoothing = 4

// waitMemory is the weight the share of a thread's stops found waiting
// keeps of its past at each stop: about the last twenty stops count.
const waitMemory = 0.95

// placing is what becomes of the sample of a thread just stopped.
type placing int

const (
	placed     placing = iota // counted at its stack, with its weight
	dropAsleep                // found waiting in the kernel (step 3)
	placedLate                // at a system call's exit beyond the thread's kernel share: counted at the caller of the call's wrapper (step 4)
)

// place decides whether and where the sample of th just stopped counts.
// asleep: the stop found th waiting in the kernel (ptrace.Sample.Asleep);
// atExit: it caught th on its way out of another system call
// (ptrace.Sample.AtSyscallExit). A sample that does not count gives its
// weight back (refund): th's credit waits for its next sample.
func (src *Source) place(th *threadState, asleep, atExit bool) placing {
	if asleep {
		return src.placeAsleep(th)
	}
	th.lands.noteWaiting(false)
	th.lands.stops++
	if !atExit {
		return placed
	}
	th.lands.exits++
	if q := th.exitTrust(); q < 1 && src.rng.Float64() >= q {
		return placedLate
	}
	return placed
}

// placeAsleep places the sample of th found waiting in the kernel. Most
// are dropped, and th's credit waits for a stop that finds it running. But
// a thread whose runs are shorter than a stop takes to land (a few tens of
// µs: a thread woken for each request, a timer thread) is found waiting at
// nearly every stop, and dropping them all would leave its CPU time out
// of the profile. So the sample counts, where the thread waits, with
// probability w², w the share of th's recent stops that found it waiting:
// near 1 for such a thread, whose CPU time then goes where it waits, as
// perf charges a wake-up's kernel time to the user stack at the system
// call; a thread found running at 90% of its stops puts well under 1% of
// its CPU time there, one found waiting at half its stops about a fifth. One waiting stop is counted in advance: a thread's first
// stop counts wherever it lands, so that a short recording shows the
// threads it could not catch running (each at its wait) rather than
// nothing of them.
func (src *Source) placeAsleep(th *threadState) placing {
	th.lands.noteWaiting(true)
	w := th.lands.waitShare()
	if src.rng.Float64() < w*w {
		return placed
	}
	return dropAsleep
}

// Step 4: stops at system call exits.
//
// A ptrace stop does not land at the instant it is asked for: the thread
// runs on until the kernel next takes it, at the interrupt that carries the
// request (tens of µs on a VM) or at its next system call, whichever comes
// first. A thread that makes a system call every 100 µs (testdata split
// reads its CPU clock so) is caught at a call's exit at half the stops,
// though it spends 2-3% of its time in the kernel: its caller's total is
// right, but the call's wrapper gets self samples of the loop around it.
// The kernel knows how the thread's CPU time divides between user and
// kernel mode (utime and stime in its stat line, which step 2 reads
// anyway). A stop at an exit stays at the wrapper with a probability q
// chosen so that the samples land at exits at the thread's kernel share k:
// with a share e of its stops at exits, q·e = k, q = k/e, at most 1. The
// others are marked late (backend.Sample.LateStop) and the resolver counts
// them at the caller of the call's wrapper, where the thread was when the
// stop was asked for. Not dropped: giving their weight to the thread's
// next sample moved CPU time between functions that alternate faster than
// the ticks (split's 1 ms cold phase lost 6 points to its 3 ms hot one at
// 499 Hz). A thread that makes a system call more often than a stop can
// land (every few µs) is caught at exits at nearly every stop; then its
// samples go to the wrapper's caller at the user share. The kernel share
// counts all of the thread's kernel time (page faults, the stops' own
// entry and exit, wake-ups), so q errs towards leaving samples at the
// wrapper, and nothing is moved until the thread used minModeTicks of CPU.

// cpuModes sums a thread's CPU time by mode from its stat readings.
type cpuModes struct {
	lastUser, lastSystem uint64 // the last reading, clock ticks
	read                 bool
	user, system         uint64 // since the first reading
}

func (m *cpuModes) note(user, system uint64) {
	if m.read && user >= m.lastUser && system >= m.lastSystem {
		m.user += user - m.lastUser
		m.system += system - m.lastSystem
	}
	m.lastUser, m.lastSystem, m.read = user, system, true
}

// landings counts where a thread's stops landed.
type landings struct {
	stops, exits int64 // of the stops that found it running, since it was first stopped
	// The recent stops, decayed by waitMemory: all of them, and those
	// that found it waiting in the kernel.
	recent, waiting float64
}

func (l *landings) noteWaiting(waiting bool) {
	l.recent = l.recent*waitMemory + 1
	l.waiting *= waitMemory
	if waiting {
		l.waiting++
	}
}

// waitShare is the share of the recent stops that found the thread
// waiting, with one waiting stop counted in advance.
func (l *landings) waitShare() float64 {
	return (l.waiting + 1) / (l.recent + 1)
}

// Enough readings for the correction: below them the shares are too rough
// and a stop at an exit counts.
const (
	minModeTicks = 25 // clock ticks of CPU time (a quarter of a second at USER_HZ 100)
	minLandings  = 10
)

// exitTrust is the probability with which a stop of th landing at a
// system call's exit stays there, so that th's samples land at exits at
// its kernel share of CPU time; 1 until enough is known.
func (th *threadState) exitTrust() float64 {
	ticks := th.modes.user + th.modes.system
	if ticks < minModeTicks || th.lands.stops < minLandings || th.lands.exits == 0 {
		return 1
	}
	k := float64(th.modes.system) / float64(ticks)
	e := float64(th.lands.exits) / float64(th.lands.stops)
	return min(1, k/e)
}

// runState is what a thread's stat line says at a tick.
type runState struct {
	running      bool   // state R: running or runnable
	letter       byte   // the state letter: R, S, D, T, ...
	user, system uint64 // CPU time in user and kernel mode, clock ticks
}

// runningAt reports whether th is running or runnable at tick, reading its
// state at most once a tick (judge may have asked already).
func (src *Source) runningAt(th *threadState, tick int64) bool {
	if th.stateTick != tick {
		st, ok := src.runs.state(th)
		th.stateTick, th.stateRunning, th.stateLetter = tick, ok && st.running, st.letter
		if ok {
			th.modes.note(st.user, st.system)
		}
	}
	return th.stateRunning
}

// wallState is the state of th's wall-clock sample at tick, stopped
// asleep (waiting in the kernel) or not: running if it was running at the
// tick and is not found waiting; else the state its stat line gave, and a
// thread found waiting is sleeping at least. What it is found waiting in
// stands for its samples until it runs again.
func (src *Source) wallState(th *threadState, tick int64, asleep bool) profile.ThreadState {
	running := src.runningAt(th, tick)
	if th.stateLetter == 't' && !asleep && !src.proc.JobStopped(th.tid) {
		// In a stop of stacktop's own, not a job-control stop: an
		// interrupt of a running thread that landed after its batch
		// ended, collected by the next one.
		running = true
	}
	if running && !asleep {
		th.blocked = profile.StateUnknown // until it is found waiting again
		return profile.StateRunning
	}
	st := profile.StateOfLetter(th.stateLetter)
	if !st.Blocked() {
		st = profile.StateSleeping
	}
	th.blocked = st
	return st
}

// charge adds what th ran between two of its readings to its credit, at
// most maxCredit periods of it.
func (src *Source) charge(th *threadState, old, cur uint64) {
	d := int64(cur - old)
	th.credit += d
	th.fresh += d
	if src.period > 0 {
		th.credit = min(th.credit, src.maxCredit())
	}
}

// refund gives back to th's credit the weight onCPU decided for a sample
// that was not taken (past the tick's deadline, or failed): that CPU time
// is still to be counted. Without it the threads not taken, the busy ones
// a short tick leaves out, lost CPU time in the profile.
func (src *Source) refund(th *threadState) {
	th.credit += th.weight * int64(src.period)
	th.weight = 0
}

// takeCredit returns the weight onCPU decided for the sample of th just
// taken, in periods.
func (src *Source) takeCredit(th *threadState) int64 {
	w := th.weight
	th.weight = 0
	return max(w, 1)
}
