package procgroup

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/engine"
	"codeberg.org/stacktop/stacktop/profile"
)

// fakeEngine is a test double of a process's engine: Run returns err
// (or panics with panicking) once ctx ends or at once when exited.
type fakeEngine struct {
	pid       int
	stats     engine.Stats
	err       error
	exited    bool
	panicking any
	ran       atomic.Bool
}

func (e *fakeEngine) Run(ctx context.Context) error {
	e.ran.Store(true)
	if e.panicking != nil {
		panic(e.panicking)
	}
	if !e.exited {
		<-ctx.Done()
	}
	return e.err
}

func (e *fakeEngine) Stats() engine.Stats { return e.stats }

func (e *fakeEngine) Snapshot() *profile.Profile {
	return profile.New(e.pid, "cmd", time.Unix(0, 0), time.Millisecond)
}

func member(e *fakeEngine, detached *[]int) Member {
	return Member{PID: e.pid, Engine: e, Detach: func() error {
		*detached = append(*detached, e.pid)
		if !e.stats.Exited {
			return errors.New("still traced")
		}
		return nil
	}, Close: func() {}}
}

func TestGroupRunStatsDetach(t *testing.T) {
	var detached []int
	a := &fakeEngine{pid: 10, exited: true, stats: engine.Stats{Samples: 3, Rate: 99, Exited: true,
		Methods: map[string]int64{"sframe": 3}, Pause: engine.PauseStats{N: 3, Max: time.Millisecond}}}
	b := &fakeEngine{pid: 20, exited: true, err: errors.New("boom"), stats: engine.Stats{Samples: 4, Rate: 50, Exited: true,
		Methods: map[string]int64{"sframe": 1, "fp": 3}, Pause: engine.PauseStats{N: 4, Max: 2 * time.Millisecond}}}
	g := New(member(a, &detached), func(pid int) (Member, error) {
		if pid != 20 {
			return Member{}, errors.New("no such process")
		}
		return member(b, &detached), nil
	})
	if err := g.Attach(30); err == nil {
		t.Fatal("Attach of a process the attach function refuses succeeded")
	}
	if err := g.Attach(20); err != nil {
		t.Fatal(err)
	}
	errs := g.Run(context.Background(), false)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "pid 20: boom") {
		t.Errorf("Run errors %v, want pid 20's", errs)
	}
	st, n := g.Stats()
	if n != 2 || st.Samples != 7 || st.Rate != 99 || !st.Exited || st.Methods["sframe"] != 4 || st.Methods["fp"] != 3 ||
		st.Pause.N != 7 || st.Pause.Max != 2*time.Millisecond {
		t.Errorf("Stats %d processes, %+v", n, st)
	}
	if p := g.Profile(); !strings.Contains(p.Command, "pid 10") || !strings.Contains(p.Command, "pid 20") {
		t.Errorf("merged profile's command %q does not name both processes", p.Command)
	}
	if err := g.Detach(); err != nil {
		t.Errorf("Detach of exited processes: %v", err)
	}
	if len(detached) != 2 {
		t.Errorf("detached %v, want both", detached)
	}
}

// TestGroupPanic: an engine's panic is raised by Run in its caller's
// goroutine, after the other engines were stopped.
func TestGroupPanic(t *testing.T) {
	var detached []int
	calm := &fakeEngine{pid: 10}
	bad := &fakeEngine{pid: 20, panicking: "engine bug"}
	g := New(member(calm, &detached), func(int) (Member, error) { return member(bad, &detached), nil })
	if err := g.Attach(20); err != nil {
		t.Fatal(err)
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "engine bug") {
			t.Errorf("recovered %v, want the engine's panic", r)
		}
		if !calm.ran.Load() {
			t.Error("the other engine never ran")
		}
	}()
	g.Run(context.Background(), false)
	t.Error("Run returned")
}

// TestGroupFollow: with follow, a child the process forks joins the group
// through the attach function.
func TestGroupFollow(t *testing.T) {
	sh := exec.Command("sh", "-c", "sleep 5 & wait")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sh.Process.Kill(); sh.Wait() }()
	var detached []int
	first := &fakeEngine{pid: sh.Process.Pid}
	joined := make(chan int, 4)
	g := New(member(first, &detached), func(pid int) (Member, error) {
		joined <- pid
		return member(&fakeEngine{pid: pid, exited: true, stats: engine.Stats{Exited: true}}, &detached), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		<-joined
		cancel()
	}()
	g.Run(ctx, true)
	if _, n := g.Stats(); n != 2 {
		t.Errorf("%d processes in the group, want the shell and its sleep", n)
	}
}

// TestGroupFollowRefused: a child that lives on but cannot be attached (a
// setuid program, a refused perf event) is named in the notes, not
// silently left out; one process's note said by every process is said
// once.
func TestGroupFollowRefused(t *testing.T) {
	sh := exec.Command("sh", "-c", "sleep 5 & wait")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sh.Process.Kill(); sh.Wait() }()
	var detached []int
	first := &fakeEngine{pid: sh.Process.Pid, stats: engine.Stats{Notes: []string{"perf: user-mode samples only"}}}
	asked := make(chan int, 4)
	g := New(member(first, &detached), func(pid int) (Member, error) {
		asked <- pid
		return Member{}, errors.New("permission denied")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var child int
	go func() {
		child = <-asked
		time.Sleep(50 * time.Millisecond) // the poll notes it after the attach returns
		cancel()
	}()
	g.Run(ctx, true)
	st, n := g.Stats()
	if n != 1 {
		t.Errorf("%d processes in the group, want the shell alone", n)
	}
	// The child is sleep, or sh between its fork and its exec.
	prefix := fmt.Sprintf("child %d (", child)
	named := slices.ContainsFunc(st.Notes, func(n string) bool {
		return strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ") not recorded: permission denied")
	})
	if !named || !slices.Contains(st.Notes, "perf: user-mode samples only") {
		t.Errorf("notes %q, want the engine's and one for child %d", st.Notes, child)
	}
}

// TestGroupStatsSumCounters: every counter of engine.Stats adds up over
// the group's processes (a counter added to Stats and forgotten here reads
// as one process's).
func TestGroupStatsSumCounters(t *testing.T) {
	int64Type := reflect.TypeFor[int64]() // counters; durations are maxima
	one := func() engine.Stats {
		var st engine.Stats
		v := reflect.ValueOf(&st).Elem()
		for i := range v.NumField() {
			if f := v.Field(i); f.Type() == int64Type {
				f.SetInt(1)
			}
		}
		st.Exited = true
		return st
	}
	var detached []int
	a := &fakeEngine{pid: 10, exited: true, stats: one()}
	b := &fakeEngine{pid: 20, exited: true, stats: one()}
	g := New(member(a, &detached), func(int) (Member, error) { return member(b, &detached), nil })
	if err := g.Attach(20); err != nil {
		t.Fatal(err)
	}
	st, _ := g.Stats()
	v := reflect.ValueOf(st)
	for i := range v.NumField() {
		if f := v.Field(i); f.Type() == int64Type && f.Int() != 2 {
			t.Errorf("Stats.%s = %d over two processes with 1 each, want 2", v.Type().Field(i).Name, f.Int())
		}
	}
}
