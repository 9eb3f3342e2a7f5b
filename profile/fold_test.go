package profile

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// longRun feeds p an hour of 99 Hz ticks of 200 threads: most idle
// (Repeat), a few busy ones alternating between two stacks, with a
// Snapshot every 500 ms as top takes them. It returns a snapshot taken
// early on, to check that folding never changes what a snapshot holds.
func longRun(p *Profile, d time.Duration) (early *Profile, earlyAgg *Aggregate) {
	const threads = 200
	ths := make([]*Thread, threads)
	tick := time.Second / 99
	stacks := [][]Frame{stack("spin_a", "busy", "main"), stack("spin_b", "busy", "main")}
	for i := range ths {
		ths[i] = p.Add(Sample{TID: 100 + i, Time: p.Start, Frames: stack("futex_wait", fmt.Sprintf("worker%d", i%7), "start_thread")})
	}
	n := 0
	for at := tick; at < d; at += tick {
		now := p.Start.Add(at)
		for i, th := range ths {
			if i < 3 { // busy
				ths[i] = p.Add(Sample{TID: 100 + i, Time: now, Frames: stacks[(n+i)%2]})
			} else {
				p.Repeat(th, now)
			}
		}
		n++
		if n%50 == 0 {
			s := p.Snapshot()
			if early == nil && at > 2*time.Minute {
				early, earlyAgg = s, s.Aggregate(0)
			}
		}
	}
	return early, earlyAgg
}

func TestKeepTimelineBoundsEvents(t *testing.T) {
	d := 15 * time.Minute
	full := New(1, "", time.Unix(1000, 0), time.Second/99)
	longRun(full, d)
	kept := New(1, "", time.Unix(1000, 0), time.Second/99)
	kept.KeepTimeline(time.Minute)
	early, earlyAgg := longRun(kept, d)

	t.Logf("%v of 200 threads: %d events in full, %d kept + %d folded counts", d, len(full.Events), len(kept.Events), len(kept.Folded))
	// The kept timeline is about a minute and a half of events (the minute,
	// RunLimit, and what accumulates between folds), whatever d.
	if limit := 4 * len(full.Events) * int(2*time.Minute) / int(d); len(kept.Events) > limit {
		t.Errorf("%d events kept, want at most %d", len(kept.Events), limit)
	}
	if len(kept.Folded) == 0 || len(kept.Folded) > 200*3 {
		t.Errorf("%d folded counts, want 1..600 (one per thread and stack)", len(kept.Folded))
	}
	// Totals are exact, and so is a window within the kept minute.
	for _, from := range []time.Duration{0, d - 30*time.Second, d - time.Minute} {
		a, b := full.Aggregate(from), kept.Aggregate(from)
		if !reflect.DeepEqual(a.Counts, b.Counts) || !reflect.DeepEqual(a.ThreadStacks, b.ThreadStacks) || a.Total != b.Total {
			t.Errorf("Aggregate(%v) differs with folding: total %d vs %d", from, a.Total, b.Total)
		}
	}
	// "Since an early snapshot" by subtraction is exact on the folded
	// profile: it matches Aggregate(from) of the full one.
	from := early.Duration() + time.Nanosecond
	a, b := full.Aggregate(from), kept.Aggregate(0).Minus(early.Aggregate(0))
	if a.Total != b.Total || !reflect.DeepEqual(a.ThreadCounts, b.ThreadCounts) {
		t.Errorf("since the early snapshot: %d samples from the full profile, %d by subtraction", a.Total, b.Total)
	}
	// A snapshot taken before the folds is untouched by them.
	if again := early.Aggregate(0); !reflect.DeepEqual(again, earlyAgg) {
		t.Error("an early snapshot changed after later folds")
	}
}

// TestKeepTimelineRetiresThreads: a process that runs each request on a
// new short-lived thread (a new TID each, named "req") for half an hour
// keeps a handful of thread records and folded counts, not one per TID
// ever seen; the totals per stack and per name are exact.
func TestKeepTimelineRetiresThreads(t *testing.T) {
	p := New(1, "", time.Unix(1000, 0), time.Second/99)
	p.KeepTimeline(time.Minute)
	tick := time.Second / 99
	stacks := [][]Frame{stack("parse", "handle", "start_thread"), stack("write", "handle", "start_thread")}
	tid := 1000
	var reqSamples int64
	for at := time.Duration(0); at < 30*time.Minute; at += tick {
		now := p.Start.Add(at)
		p.Add(Sample{TID: 1, ThreadName: "main", Time: now, Frames: stack("accept", "main")})
		// Each tick a new request thread is sampled once, then is gone.
		p.Add(Sample{TID: tid, ThreadName: "req", Time: now, Frames: stacks[tid%2]})
		tid++
		reqSamples++
	}
	if n := len(p.Threads); n > 2*int(time.Minute/tick)+100 {
		t.Errorf("%d thread records kept for %d threads seen, want about a minute's worth", n, tid-1000+1)
	}
	if n := len(p.Folded); n > 10 {
		t.Errorf("%d folded counts, want a few (one per name and stack)", n)
	}
	agg := p.Aggregate(0)
	byName := map[string]int64{}
	for tid, n := range agg.ThreadCounts {
		byName[p.Threads[tid].Name] += n
	}
	if byName["req"] != reqSamples || byName["main"] != reqSamples || agg.Total != 2*reqSamples {
		t.Errorf("samples by name %v (total %d), want %d each", byName, agg.Total, reqSamples)
	}
	var reqs int64
	for _, th := range p.Threads {
		if th.Name == "req" {
			reqs += th.Samples
		}
	}
	if reqs != reqSamples {
		t.Errorf("the req threads' records count %d samples, want %d", reqs, reqSamples)
	}
}

// TestMinusAfterRetire: top's "since reset" (Minus of an aggregate taken
// before) stays exact in total and per stack when threads of the base
// were retired since, and does not fail on their absence.
func TestMinusAfterRetire(t *testing.T) {
	p := New(1, "", time.Unix(1000, 0), time.Second/99)
	p.KeepTimeline(time.Minute)
	tick := time.Second / 99
	tid := 1000
	var base *Aggregate
	var since int64
	for at := time.Duration(0); at < 10*time.Minute; at += tick {
		p.Add(Sample{TID: tid, ThreadName: "req", Time: p.Start.Add(at), Frames: stack("parse", "handle")})
		tid++
		if base != nil {
			since++
		}
		if base == nil && at >= 5*time.Second {
			base = p.Snapshot().Aggregate(0)
		}
	}
	a := p.Snapshot().Aggregate(0).Minus(base)
	var perThread int64
	for _, n := range a.ThreadCounts {
		if n < 0 {
			t.Fatalf("a negative count per thread: %v", n)
		}
		perThread += n
	}
	if a.Total != since {
		t.Errorf("since the base: %d samples, want %d", a.Total, since)
	}
}
