package ptracesampler

// On-CPU weighting: a sample counts the CPU time its thread used.
//
// An on-CPU profile must say where the process's CPU time went. Charging
// every thread that ran since the previous tick with one sample does not:
// a thread that wakes every 500 µs for a few microseconds "ran" at every
// tick, and got as many samples as a thread spinning at 100%.
//
// So each thread keeps credit, the CPU time (schedstat run time) it used
// and no sample has counted yet. At each tick where a thread ran, the
// engine decides a weight in sampling periods: the expected weight is the
// thread's recent CPU time per decision (a moving average) plus a quarter
// of the credit beyond it, rounded at random (whole periods, plus one more
// with the probability of the fraction left: a thread that runs 50 µs of
// a 10 ms period is sampled at about one tick in 200, with weight 1). A
// weight of zero takes no sample and does not stop the thread. What is
// given is taken from the credit (and given back if the sample is not
// taken: past the tick's deadline, or failed), so the weights add up to the CPU time
// the threads used, and each thread's share of the profile is its share of
// the CPU. The sample is taken at the tick, like a sample of "the threads
// that ran" always was.
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
// The error bound: the weights differ from a thread's CPU time by its
// credit, which the pull brings back towards one decision's worth (a
// period for a busy thread) and whose rounding is random and unbiased;
// a thread that exits takes its credit along; a starved engine (few
// ticks) lags behind a thread whose CPU rises, by a few of its ticks.
// Schedstat's run time itself is the scheduler's own accounting.
// docs/record.md has the figures.

// onCPU appends to todo the threads of ran that get a sample at this tick,
// and decides their weights.
func (src *Source) onCPU(ran, todo []*threadState) []*threadState {
	p := int64(src.period)
	for _, th := range ran {
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
		w := want / p
		if frac := want - w*p; frac > 0 && src.rng.Int64N(p) < frac {
			w++
		}
		th.credit -= w * p
		th.weight = w
		if w > 0 {
			todo = append(todo, th)
		}
	}
	return todo
}

// rateSmoothing is the inverse gain of the rate's moving average and of
// the pull of the credit: each decision moves them by a quarter.
const rateSmoothing = 4

// charge adds what th ran between two of its readings to its credit.
func (th *threadState) charge(old, cur uint64) {
	d := int64(cur - old)
	th.credit += d
	th.fresh += d
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
