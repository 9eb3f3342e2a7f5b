package sampler

// On-CPU weighting: a sample counts the CPU time its thread used.
//
// An on-CPU profile must say where the process's CPU time went. Charging
// every thread that ran since the previous tick with one sample does not:
// a thread that wakes every 500 µs for a few microseconds "ran" at every
// tick, and got as many samples as a thread spinning at 100%.
//
// So each thread keeps credit, the CPU time (schedstat run time) it used
// since the engine last decided about it. At each tick where a thread
// ran, its credit becomes a weight in sampling periods: the whole periods,
// plus one more with the probability of the fraction left (a thread that
// ran 50 µs of a 10 ms period is sampled at one tick in 200, with weight
// 1). A weight of zero takes no sample and does not stop the thread. The
// expected weight is exactly the credit, so the profile's total, samples ×
// period, is the CPU time the process used, and each thread's share of it
// its share of the CPU. The sample is taken at the tick, like a sample of
// "the threads that ran" always was: where a thread was, among the ticks
// it ran at, not where it was when it was preempted or went to sleep after
// a long run.
//
// A credit of several periods (ticks the engine could not keep on a loaded
// machine, a thread whose readings were backed off) makes one sample of
// that weight: noisier than several samples, but the total stays true.
//
// The error bound: in expectation none; per thread the weights differ from
// its CPU time by a sum of independent roundings, each within one period
// (the standard deviation of a thread's total is at most half a period
// times the square root of the ticks it ran at), plus what a thread ran
// since its last tick when the recording ends or the thread exits.
// Schedstat's run time itself is exact to the scheduler's accounting (it
// moves when a thread leaves a CPU, or at a scheduler tick). docs/record.md
// has the figures.

// onCPU appends to todo the threads of ran that get a sample at this tick,
// and decides their weights.
func (e *Engine) onCPU(ran, todo []*threadState) []*threadState {
	p := int64(e.period)
	for _, th := range ran {
		if th.credit <= 0 {
			th.credit, th.weight = 0, 0
			continue
		}
		w := th.credit / p
		if frac := th.credit - w*p; frac > 0 && e.rng.Int64N(p) < frac {
			w++
		}
		th.credit, th.weight = 0, w
		if w > 0 {
			todo = append(todo, th)
		}
	}
	return todo
}

// charge adds what th ran between two of its readings to its credit.
func (th *threadState) charge(old, cur uint64) {
	th.credit += int64(cur - old)
}

// takeCredit returns the weight onCPU decided for the sample of th just
// taken, in periods.
func (e *Engine) takeCredit(th *threadState) int64 {
	w := th.weight
	th.weight = 0
	return max(w, 1)
}
