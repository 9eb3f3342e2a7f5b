package ptracesampler

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A sample decided but not taken (the tick's deadline, a failure, found
// asleep at the stop) gives its weight back: the busy threads a short tick
// leaves out keep their CPU time, and the next decision gives it.
func TestRefundNotTaken(t *testing.T) {
	const p = int64(10 * time.Millisecond)
	m := newModel(1, 1, 0)
	m.inR = map[int]bool{1: true}
	e := &Source{period: time.Duration(p), runs: m, rng: rand.New(rand.NewPCG(1, 2))}
	th := &threadState{tid: 1}
	e.charge(th, 0, uint64(4*p)) // four periods run, none counted
	e.onCPU(1, []*threadState{th}, nil)
	if th.weight == 0 {
		t.Fatalf("no weight decided from a credit of %d ns", 4*p)
	}
	e.refund(th)
	if th.credit != 4*p || th.weight != 0 {
		t.Errorf("after the refund: credit %d ns, weight %d; want %d ns, 0", th.credit, th.weight, 4*p)
	}
	// Given back, the time is counted by later samples: with no more run
	// time, the weights decided from here and the credit left (what the
	// rate's decay gave beyond it) add up to the four periods.
	var given int64
	for tick := int64(2); tick < 102; tick++ {
		todo := e.onCPU(tick, []*threadState{th}, nil)
		if len(todo) > 0 {
			given += e.takeCredit(th)
		}
	}
	if given < 4 || given*p+th.credit != 4*p {
		t.Errorf("later samples weighed %d periods, credit left %d ns; want 4 periods in all", given, th.credit)
	}
}

// Only threads running at the tick get a sample: a thread that ran since
// the previous tick but is asleep now (its state is not R) is not stopped,
// and keeps its credit for a tick that finds it running. Each thread's
// state is read once a tick however often it is asked.
func TestOnCPUOnlyRunning(t *testing.T) {
	const p = int64(10 * time.Millisecond)
	m := newModel(1, 3, 0)
	m.inR = map[int]bool{1: true, 3: true}
	src := &Source{period: time.Duration(p), runs: m, rng: rand.New(rand.NewPCG(1, 2))}
	ran := []*threadState{{tid: 1}, {tid: 2}, {tid: 3}}
	for _, th := range ran {
		src.charge(th, 0, uint64(2*p))
	}
	todo := src.onCPU(1, ran, nil)
	if len(todo) != 2 || todo[0].tid != 1 || todo[1].tid != 3 {
		t.Fatalf("sampled %v, want threads 1 and 3 (in R)", tids(todo))
	}
	if th := ran[1]; th.credit != 2*p || th.weight != 0 {
		t.Errorf("asleep thread: credit %d, weight %d; want %d, 0", th.credit, th.weight, 2*p)
	}
	if src.runningAt(ran[0], 1); m.states != 3 {
		t.Errorf("%d state reads for 3 threads at one tick, one asked again; want 3", m.states)
	}
	m.inR[2] = true
	if todo := src.onCPU(2, ran[1:2], nil); len(todo) != 1 || ran[1].weight == 0 {
		t.Errorf("thread 2 running at the next tick: sampled %v with weight %d, want it with its credit", tids(todo), ran[1].weight)
	}
}

// A thread seldom found running keeps at most maxCreditPeriods periods of
// credit, and at least minCreditCap: minutes of CPU are not charged at
// once to the one stack that finds it.
func TestCreditCapped(t *testing.T) {
	for _, c := range []struct {
		period time.Duration
		cap    time.Duration
	}{
		{100 * time.Millisecond, maxCreditPeriods * 100 * time.Millisecond}, // 10 Hz
		{10 * time.Millisecond, minCreditCap},                               // 99 Hz
		{time.Millisecond, minCreditCap},                                    // 999 Hz
	} {
		src := &Source{period: c.period}
		th := &threadState{}
		for i := range uint64(1000) {
			src.charge(th, i*uint64(c.period), (i+1)*uint64(c.period))
		}
		if time.Duration(th.credit) != c.cap {
			t.Errorf("period %v: credit %v after 1,000 periods unseen, want the cap %v", c.period, time.Duration(th.credit), c.cap)
		}
	}
}

func tids(ths []*threadState) []int {
	var out []int
	for _, th := range ths {
		out = append(out, th.tid)
	}
	return out
}

// Stops that land at system call exits stay there at the thread's kernel
// share, the others count at the wrapper's caller (placedLate): a thread in
// the kernel 2.5% of its CPU time whose stops land at exits half the time
// (a call every 100 µs against tens of µs for a stop to land) keeps 2.5%
// of its samples at exits, not 50%. None is dropped.
func TestExitsCountAtKernelShare(t *testing.T) {
	src := &Source{period: 10 * time.Millisecond, rng: rand.New(rand.NewPCG(5, 6))}
	th := &threadState{}
	th.modes.note(0, 0)
	th.modes.note(975, 25)
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 40000
	var atExits int
	for range n {
		atExit := rng.IntN(2) == 0
		switch src.place(th, false, atExit) {
		case placed:
			if atExit {
				atExits++
			}
		case placedLate:
			if !atExit {
				t.Fatal("a stop in user code was marked late")
			}
		default:
			t.Fatal("a stop that found the thread running was dropped")
		}
	}
	if got := 100 * float64(atExits) / n; got < 2 || got > 3 {
		t.Errorf("%.2f%% of the samples stay at exits, want 2.5%%", got)
	}
	// Too little known: every stop at an exit stays.
	fresh := &threadState{}
	fresh.modes.note(0, 0)
	fresh.modes.note(10, 0)
	for range 5 {
		if src.place(fresh, false, true) != placed {
			t.Fatal("a stop at an exit moved before the thread's kernel share was known")
		}
	}
}

// A stop that finds the thread waiting counts there with probability w²,
// w the share of its recent stops found waiting: a thread whose runs are
// too short to catch (found waiting at every stop) is charged where it
// waits; one found running at 90% of its stops almost never.
func TestAsleepCountsForUncatchableThreads(t *testing.T) {
	src := &Source{period: 10 * time.Millisecond, rng: rand.New(rand.NewPCG(9, 10))}
	counted := func(waitShare float64) float64 {
		th := &threadState{}
		rng := rand.New(rand.NewPCG(11, 12))
		var asleep, kept int
		for range 20000 {
			if rng.Float64() < waitShare {
				asleep++
				if src.place(th, true, false) == placed {
					kept++
				}
			} else {
				src.place(th, false, false)
			}
		}
		return float64(kept) / float64(asleep)
	}
	if got := counted(1); got < 0.9 {
		t.Errorf("always found waiting: %.2f of its stops count, want nearly all", got)
	}
	if got := counted(0.1); got > 0.05 {
		t.Errorf("found waiting at 10%% of its stops: %.3f of those count, want about 0.01", got)
	}
}
