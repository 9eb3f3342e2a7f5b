package sampler

// On-CPU weighting: a sample counts the CPU time its thread used.
//
// An on-CPU profile must say where the process's CPU time went. Charging
// every thread that ran since the previous tick with one sample does not:
// a thread that wakes every 500 µs for a few microseconds "ran" at every
// tick, and got as many samples as a thread spinning at 100%.
//
// So each thread keeps credit, the CPU time (schedstat run time) it used
// since its last sample, and a sample's weight is that credit in sampling
// periods, rounded; the remainder (less than half a period either way)
// stays for the next sample. The weights of all samples then add up to the
// CPU time of the sampled threads, in periods, whatever the rate achieved,
// the ticks missed or the back-off of idle threads' readings: what a
// thread ran between two samples is never lost, only carried.
//
// Which moment stands for that time: a thread is sampled once its credit
// reaches half a period, at a tick where it is running or runnable (so a
// thread that spins a quarter of the time is seen spinning, not in the
// sleep between two spins), or anyway once its credit reaches
// deferLimit periods (a thread that is almost never caught on a CPU, like
// one that only wakes to sleep again, is seen where it waits).
//
// The error bound: per thread, what it ran since its last sample (under
// half a period, or up to deferLimit periods while it is never caught
// running, more after a burst the engine is still spreading) is not in
// the profile yet, and a thread that exits takes its credit with it. Schedstat's run time itself is exact to the scheduler's
// accounting (it moves when a thread leaves a CPU, or at a scheduler tick).
// docs/record.md has the figures.

// deferLimit is how many periods of credit a thread that is never found
// running may gather before it is sampled where it is.
const deferLimit = 4

// onCPU appends to todo the threads of ran whose credit is due for a
// sample at this tick.
func (e *Engine) onCPU(ran, todo []*threadState) []*threadState {
	half := int64(e.period / 2)
	for _, th := range ran {
		switch {
		case th.credit < half:
		case th.credit >= deferLimit*int64(e.period), e.runs.running(th):
			todo = append(todo, th)
		}
	}
	return todo
}

// charge adds what th ran between two of its readings to its credit.
func (th *threadState) charge(old, cur uint64) {
	th.credit += int64(cur - old)
}

// takeCredit returns the weight of a sample of th, in periods (at least
// 1), and keeps the remainder of its credit. A large credit (a thread that
// ran a burst while the engine could not keep up) is spread over the
// following samples, half of it at a time: one stack standing for many
// periods makes the profile noisier, not truer. The total is kept.
func (e *Engine) takeCredit(th *threadState) int64 {
	p := int64(e.period)
	w := max((th.credit+p/2)/p, 1)
	if w > deferLimit {
		w = max(deferLimit, w/2)
	}
	th.credit -= w * p
	return w
}
