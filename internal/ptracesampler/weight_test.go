package ptracesampler

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A sample decided but not taken (the tick's deadline, a failure) gives
// its weight back: the busy threads a short tick leaves out keep their CPU
// time, and the next decision gives it.
func TestRefundNotTaken(t *testing.T) {
	const p = int64(10 * time.Millisecond)
	e := &Source{period: time.Duration(p), rng: rand.New(rand.NewPCG(1, 2))}
	th := &threadState{}
	th.charge(0, uint64(4*p)) // four periods run, none counted
	e.onCPU([]*threadState{th}, nil)
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
	for range 100 {
		todo := e.onCPU([]*threadState{th}, nil)
		if len(todo) > 0 {
			given += e.takeCredit(th)
		}
	}
	if given < 4 || given*p+th.credit != 4*p {
		t.Errorf("later samples weighed %d periods, credit left %d ns; want 4 periods in all", given, th.credit)
	}
}
