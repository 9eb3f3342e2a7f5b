package profile

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Frame is one symbolised frame. Function is empty when no symbol covers the
// address; Name then falls back to module+offset so no frame is dropped.
type Frame struct {
	PC       uint64
	Function string
	Offset   uint64 // PC minus the function's start (or the module's, when Function is empty)
	Module   string // path of the mapped object
	BuildID  string
	// The mapping that holds PC, for pprof's mapping table.
	MapStart, MapLimit, MapOffset uint64
	File                          string
	Line                          int
	Inlined                       bool   // an inlined call inside the next (outer) frame's function
	Method                        string // unwind method that produced the frame
}

// Name is the frame's display name: the function, or module+0xoff.
func (f Frame) Name() string {
	if f.Function != "" {
		return f.Function
	}
	if f.Module == "" {
		return fmt.Sprintf("0x%x", f.PC)
	}
	return filepath.Base(f.Module) + "+0x" + strconv.FormatUint(f.Offset, 16)
}

// Sample is one stack of one thread at one moment.
type Sample struct {
	TID        int
	ThreadName string
	Time       time.Time
	Frames     []Frame // leaf first
	Weight     int64   // 0 counts as 1
	Truncated  bool    // the unwinder did not reach the outermost frame
}

// Event is one sample as stored: when, which thread, which interned stack.
type Event struct {
	Time   time.Duration // since Profile.Start
	TID    int32
	Stack  int32
	Weight int32
}

// Thread is what the profile knows of one thread.
type Thread struct {
	TID       int
	Name      string
	Samples   int64
	LastStack int32 // index into Stacks, -1 if none yet
	LastTime  time.Duration
	// LastTruncated tells whether the last stack did not reach the
	// outermost frame.
	LastTruncated bool
}

// Profile accumulates samples. See the package documentation for who may
// touch it when.
type Profile struct {
	PID     int
	Command string
	Start   time.Time
	Period  time.Duration // nominal sampling period (1/rate)

	Stacks  [][]Frame // interned, leaf first
	Events  []Event
	Threads map[int]*Thread

	// Counters the sampler maintains and the outputs report.
	Samples   int64 // stacks added (sum of weights)
	Truncated int64 // of which did not reach the outermost frame
	Missed    int64 // ticks or thread samples that could not be taken
	Errors    int64 // unwind or ptrace errors

	index  map[string]int32
	keyBuf []byte
	// methods[i] counts Stacks[i]'s frames by unwind method and uses[i]
	// the samples of Stacks[i]: a sample costs one increment, however
	// deep its stack (see MethodFrames).
	methods [][]methodCount
	uses    []int64
}

type methodCount struct {
	method string
	n      int64
}

// New returns an empty profile of process pid started at start.
func New(pid int, command string, start time.Time, period time.Duration) *Profile {
	return &Profile{
		PID: pid, Command: command, Start: start, Period: period,
		Threads: map[int]*Thread{},
		index:   map[string]int32{},
	}
}

// appendStackKey identifies a stack by its frames' addresses and names: the
// same PC can stand for several frames when calls were inlined into it.
func appendStackKey(b []byte, frames []Frame) []byte {
	for _, f := range frames {
		b = strconv.AppendUint(b, f.PC, 16)
		b = append(b, 0)
		b = append(b, f.Function...)
		b = append(b, 0)
	}
	return b
}

// intern returns the index of the stack, storing a copy the first time. The
// key buffer is reused, and a map lookup keyed by string(bytes) does not
// allocate, so a stack seen before costs no allocation.
func (p *Profile) intern(frames []Frame) int32 {
	p.keyBuf = appendStackKey(p.keyBuf[:0], frames)
	if i, ok := p.index[string(p.keyBuf)]; ok {
		return i
	}
	i := int32(len(p.Stacks))
	p.Stacks = append(p.Stacks, append([]Frame(nil), frames...))
	p.index[string(p.keyBuf)] = i
	var tally []methodCount
	for _, f := range frames {
		if f.Method == "" {
			continue
		}
		if j := slices.IndexFunc(tally, func(m methodCount) bool { return m.method == f.Method }); j >= 0 {
			tally[j].n++
		} else {
			tally = append(tally, methodCount{f.Method, 1})
		}
	}
	p.methods = append(p.methods, tally)
	p.uses = append(p.uses, 0)
	return i
}

// Add records one sample.
func (p *Profile) Add(s Sample) {
	w := s.Weight
	if w <= 0 {
		w = 1
	}
	th := p.Threads[s.TID]
	if th == nil {
		th = &Thread{TID: s.TID, LastStack: -1}
		p.Threads[s.TID] = th
	}
	if s.ThreadName != "" {
		th.Name = s.ThreadName
	}
	th.LastStack, th.LastTruncated = p.intern(s.Frames), s.Truncated
	p.add(th, s.Time, w)
}

// Repeat records one more sample of thread tid with the stack of its last
// sample, for a thread that did not run since: nothing is interned again.
// It reports false, and records nothing, when tid has no sample yet.
func (p *Profile) Repeat(tid int, t time.Time) bool {
	th := p.Threads[tid]
	if th == nil || th.LastStack < 0 {
		return false
	}
	p.add(th, t, 1)
	return true
}

func (p *Profile) add(th *Thread, t time.Time, w int64) {
	at := t.Sub(p.Start)
	p.Events = append(p.Events, Event{Time: at, TID: int32(th.TID), Stack: th.LastStack, Weight: int32(w)})
	th.Samples += w
	th.LastTime = at
	p.Samples += w
	if th.LastTruncated {
		p.Truncated += w
	}
	p.uses[th.LastStack]++
}

// Snapshot returns an immutable copy that readers on other goroutines may
// use while the sampler keeps adding. Interned stacks are never modified
// after they are stored, so they are shared, not copied.
func (p *Profile) Snapshot() *Profile {
	c := *p
	c.Stacks = p.Stacks[:len(p.Stacks):len(p.Stacks)]
	c.Events = p.Events[:len(p.Events):len(p.Events)]
	c.Threads = make(map[int]*Thread, len(p.Threads))
	for tid, th := range p.Threads {
		t := *th
		c.Threads[tid] = &t
	}
	c.methods = p.methods[:len(p.methods):len(p.methods)]
	c.uses = slices.Clone(p.uses)
	c.index, c.keyBuf = nil, nil // a snapshot is read-only
	return &c
}

// MethodFrames counts the frames of all samples by the unwind method that
// produced them.
func (p *Profile) MethodFrames() map[string]int64 {
	out := map[string]int64{}
	for i, tally := range p.methods {
		for _, m := range tally {
			out[m.method] += m.n * p.uses[i]
		}
	}
	return out
}

// Duration is the time from Start to the last event.
func (p *Profile) Duration() time.Duration {
	if len(p.Events) == 0 {
		return 0
	}
	return p.Events[len(p.Events)-1].Time
}
