package profile

import (
	"math"
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
	// After, for a frame without a function, is the nearest symbol of its
	// module before PC: a hint where the code is, not its name.
	After string
}

// Name is the frame's name wherever frames are grouped or shown by
// function (profiles, flame graphs, top): the function, or, when no symbol
// covers the address, "module+0xoff" with the module's file name (see
// ModuleBase) and the ELF virtual address, the number objdump and
// addr2line take, or "0xPC" for code outside any mapped file (JIT). A
// frame is never dropped for lack of a name. Label is the same name with
// the frame's offset, for stack listings.
func (f Frame) Name() string {
	if f.Function != "" {
		return f.Function
	}
	return string(f.appendName(nil))
}

// Label is the frame's name as a stack listing (stacktop dump, pstack
// style) prints it: Name with the offset into the function
// ("main+0x2f"), except for an inlined frame, which shares the PC of the
// frame that contains it, and a signal trampoline (SignalFrame), which has
// no function to be inside. A frame without a function adds the nearest
// symbol before it as a hint, not a name: "libc.so.6+0x64af (after
// sleep)".
func (f Frame) Label() string {
	return string(f.AppendLabel(nil))
}

// AppendLabel appends Label to b: a dump of a thousand threads writes its
// frames without a string per frame.
func (f Frame) AppendLabel(b []byte) []byte {
	switch {
	case f.Function == "":
		b = f.appendName(b)
		if f.After != "" {
			b = append(b, " (after "...)
			b = append(b, f.After...)
			b = append(b, ')')
		}
		return b
	case f.Inlined || f.Function == SignalFrame:
		return append(b, f.Function...)
	}
	b = append(b, f.Function...)
	b = append(b, "+0x"...)
	return strconv.AppendUint(b, f.Offset, 16)
}

// appendName appends Name to b.
func (f Frame) appendName(b []byte) []byte {
	switch {
	case f.Function != "":
		return append(b, f.Function...)
	case f.Module == "":
		b = append(b, "0x"...)
		return strconv.AppendUint(b, f.PC, 16)
	}
	b = append(b, ModuleBase(f.Module)...)
	b = append(b, "+0x"...)
	return strconv.AppendUint(b, f.Offset, 16)
}

// SignalFrame is the Function of a signal trampoline's frame, as gdb
// names it.
const SignalFrame = "<signal handler called>"

// ModuleBase is the file name of a module's path as frames show it
// ("libc.so.6" for /usr/lib/x86_64-linux-gnu/libc.so.6), or "??", as gdb
// prints unknown code, for no module.
func ModuleBase(path string) string {
	if path == "" {
		return "??"
	}
	return filepath.Base(path)
}

// Sample is one stack of one thread at one moment.
type Sample struct {
	TID        int
	ThreadName string
	Time       time.Time
	Frames     []Frame // leaf first
	Weight     int64   // 0 counts as 1
	Truncated  bool    // the unwinder did not reach the outermost frame
	// State is what the thread was doing at the sample, where the back
	// end knows (wall-clock sampling: record --idle); the same frames in
	// another state are another stack (Profile.StackKinds).
	State ThreadState
}

// StackKind is what, besides its frames, sets a stack apart: the thread
// state it was sampled in, and whether its walk stopped short of the
// outermost frame. The same frames of another kind are another stack, so
// totals per stack (Aggregate, upload windows) keep both.
type StackKind struct {
	State     ThreadState
	Truncated bool
}

// ThreadState is a thread's scheduling state at a sample.
type ThreadState uint8

const (
	StateUnknown  ThreadState = iota
	StateRunning              // on a CPU, or runnable (R)
	StateSleeping             // waiting for an event: a lock, I/O readiness, a timer (S)
	StateDiskWait             // in uninterruptible sleep, mostly disk I/O (D)
	StateStopped              // stopped by a signal or a debugger (T, t)
)

// String is the state's name as labels carry it: "running", "sleeping",
// "disk wait", "stopped"; "" for StateUnknown.
func (s ThreadState) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateSleeping:
		return "sleeping"
	case StateDiskWait:
		return "disk wait"
	case StateStopped:
		return "stopped"
	}
	return ""
}

// Blocked reports whether the thread was off the CPU, waiting.
func (s ThreadState) Blocked() bool {
	return s == StateSleeping || s == StateDiskWait || s == StateStopped
}

// StateOfLetter is the state a /proc stat state letter names.
func StateOfLetter(c byte) ThreadState {
	switch c {
	case 'R':
		return StateRunning
	case 'S', 'I':
		return StateSleeping
	case 'D':
		return StateDiskWait
	case 'T', 't':
		return StateStopped
	}
	return StateUnknown
}

// Event is a run of samples as stored: Weight samples of one thread with
// one interned stack, the first at Time and the last Span later, at even
// intervals. Add starts a new Event; Repeat, called once per tick for a
// thread that did not run, extends the thread's open one. So a thousand
// idle threads under --idle cost a thousand Events per RunLimit, not per
// tick. A run also ends at a Snapshot (readers share the Events before
// it).
type Event struct {
	Time   time.Duration // of the first sample, since Profile.Start
	Span   time.Duration // from the first sample to the last
	TID    int32
	Stack  int32
	Weight int32
}

// End is the time of the run's last sample.
func (e Event) End() time.Duration { return e.Time + e.Span }

// RunLimit bounds an Event's Span, so a window that starts at t need only
// look at events from t-RunLimit on (see Aggregate).
const RunLimit = 10 * time.Second

// Thread is what the profile knows of one thread.
type Thread struct {
	TID       int
	Name      string
	PID       int // the thread's process; 0 means Profile.PID (see Merge)
	Samples   int64
	Truncated int64 // of Samples, those that did not reach the outermost frame
	LastStack int32 // index into Stacks, -1 if none yet
	LastTime  time.Duration
	// LastTruncated tells whether the last stack did not reach the
	// outermost frame.
	LastTruncated bool
	// retired tells that the thread had no event left in the timeline
	// when it was folded: it holds the folded samples of every retired
	// thread of its name and process (see KeepTimeline).
	retired bool
	// dropped tells that the record was merged into its name's retired
	// one and is no longer the profile's: see Dropped.
	dropped bool
	// run is the index in Events of the thread's open run (its last Add's
	// event, with the stack Repeat repeats); -1 if none.
	run int32
}

// Profile accumulates samples. See the package documentation for who may
// touch it when.
type Profile struct {
	PID     int
	Command string
	Start   time.Time
	Period  time.Duration // nominal sampling period (1/rate)
	// Wall tells a wall-clock profile (record --idle: every thread counted
	// at every tick) from an on-CPU one, where a sample's weight is the
	// CPU time its thread used, in periods.
	Wall bool

	Stacks [][]Frame // interned, leaf first
	// StackKinds holds the kind of each of Stacks, where any is not the
	// zero kind (nil, or shorter: the rest are zero); see StackKind.
	StackKinds []StackKind
	Events     []Event
	Threads    map[int]*Thread
	// Folded holds the samples of events folded out of the timeline, all
	// before FoldedUntil (see KeepTimeline); empty unless KeepTimeline.
	Folded      []FoldedCount
	FoldedUntil time.Duration

	// Counters the sampler maintains and the outputs report.
	Samples   int64 // stacks added (sum of weights)
	Truncated int64 // of which did not reach the outermost frame
	Missed    int64 // ticks or thread samples that could not be taken
	Errors    int64 // unwind or ptrace errors

	index  map[string]int32
	keyBuf []byte
	// shared tells that Stacks' and methods' arrays are shared with a
	// snapshot: SetFrames copies them before it replaces an element.
	shared bool
	// sealed is len(Events) at the last Snapshot: events before it are
	// shared with readers and never extended.
	sealed int
	end    time.Duration // the last sample's time
	// methods[i] counts Stacks[i]'s frames by unwind method and uses[i]
	// the samples of Stacks[i]: a sample costs one increment, however
	// deep its stack (see MethodFrames).
	methods [][]methodCount
	uses    []int64
	// keep is KeepTimeline's d; foldLook is len(Events) at the last look.
	keep     time.Duration
	foldLook int
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

// appendStackKey identifies a stack by its frames' addresses and names (the
// same PC can stand for several frames when calls were inlined into it)
// and its kind.
func appendStackKey(b []byte, frames []Frame, kind StackKind) []byte {
	for _, f := range frames {
		b = strconv.AppendUint(b, f.PC, 16)
		b = append(b, 0)
		b = append(b, f.Function...)
		b = append(b, 0)
	}
	if kind != (StackKind{}) {
		t := byte(0)
		if kind.Truncated {
			t = 1
		}
		b = append(b, 1, byte(kind.State), t)
	}
	return b
}

// StackKind is the kind of stack id.
func (p *Profile) StackKind(id int32) StackKind {
	if id < 0 || int(id) >= len(p.StackKinds) {
		return StackKind{}
	}
	return p.StackKinds[id]
}

// StackState is the thread state stack id was sampled in.
func (p *Profile) StackState(id int32) ThreadState { return p.StackKind(id).State }

// intern returns the index of the stack, storing a copy the first time. The
// key buffer is reused, and a map lookup keyed by string(bytes) does not
// allocate, so a stack seen before costs no allocation.
func (p *Profile) intern(frames []Frame, kind StackKind) int32 {
	p.keyBuf = appendStackKey(p.keyBuf[:0], frames, kind)
	if i, ok := p.index[string(p.keyBuf)]; ok {
		return i
	}
	i := int32(len(p.Stacks))
	if kind != (StackKind{}) || len(p.StackKinds) > 0 {
		for len(p.StackKinds) < len(p.Stacks) {
			p.StackKinds = append(p.StackKinds, StackKind{})
		}
		p.StackKinds = append(p.StackKinds, kind)
	}
	p.Stacks = append(p.Stacks, append([]Frame(nil), frames...))
	p.index[string(p.keyBuf)] = i
	p.methods = append(p.methods, methodTally(frames))
	p.uses = append(p.uses, 0)
	return i
}

// SetFrames replaces the frames of stack id (as Thread.LastStack gives it)
// with frames of the same sampled addresses that say more: the stack was
// added before its objects' line tables were ready, and now they are. The
// old frames are not modified: snapshots taken before keep them.
//
// The index learns the new frames' key, so a later sample with them gets
// id rather than a second id holding the same frames; the old key keeps
// naming id too (a sample still lacking the lines is the same stack). If
// the new key already names another stack (one interned with the complete
// frames before this call), that mapping stays: ids never move, and every
// later sample with those frames keeps going to that one stack.
func (p *Profile) SetFrames(id int32, frames []Frame) {
	if id < 0 || int(id) >= len(p.Stacks) {
		return
	}
	if p.shared {
		p.Stacks = slices.Clone(p.Stacks)
		p.methods = slices.Clone(p.methods)
		p.shared = false
	}
	p.Stacks[id] = append([]Frame(nil), frames...)
	p.methods[id] = methodTally(frames)
	if p.index != nil {
		p.keyBuf = appendStackKey(p.keyBuf[:0], frames, p.StackKind(id))
		if _, ok := p.index[string(p.keyBuf)]; !ok {
			p.index[string(p.keyBuf)] = id
		}
	}
}

// methodTally counts frames by unwind method.
func methodTally(frames []Frame) []methodCount {
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
	return tally
}

// Add records one sample and returns its thread's record, which Repeat
// takes.
func (p *Profile) Add(s Sample) *Thread {
	w := s.Weight
	if w <= 0 {
		w = 1
	}
	th := p.Threads[s.TID]
	if th == nil {
		th = &Thread{TID: s.TID, LastStack: -1, run: -1}
		p.Threads[s.TID] = th
	}
	if s.ThreadName != "" {
		th.Name = s.ThreadName
	}
	th.LastStack, th.LastTruncated = p.intern(s.Frames, StackKind{State: s.State, Truncated: s.Truncated}), s.Truncated
	p.add(th, s.Time, w, false)
	return th
}

// Repeat records one more sample of th (as Add returned it) with the
// stack of its last sample, for a thread that did not run since: nothing
// is interned or looked up again, which with a thousand idle threads under
// --idle would be most of the sampler's work.
func (p *Profile) Repeat(th *Thread, t time.Time) {
	p.add(th, t, 1, true)
}

// add records w samples of th's last stack at t, extending th's open run
// if extend (a Repeat) and the run may still grow.
func (p *Profile) add(th *Thread, t time.Time, w int64, extend bool) {
	at := t.Sub(p.Start)
	if r := int(th.run); extend && r >= p.sealed &&
		at-p.Events[r].Time <= RunLimit && int64(p.Events[r].Weight)+w <= math.MaxInt32 {
		e := &p.Events[r]
		e.Weight += int32(w)
		e.Span = at - e.Time
	} else {
		th.run = int32(len(p.Events))
		p.Events = append(p.Events, Event{Time: at, TID: int32(th.TID), Stack: th.LastStack, Weight: int32(w)})
		defer p.maybeFold() // after the counters below, which it does not read
	}
	p.end = max(p.end, at)
	th.Samples += w
	th.LastTime = at
	p.Samples += w
	if th.LastTruncated {
		p.Truncated += w
		th.Truncated += w
	}
	p.uses[th.LastStack]++
}

// Snapshot returns an immutable copy that readers on other goroutines may
// use while the sampler keeps adding. Interned stacks are never modified
// after they are stored (SetFrames replaces one in a copy of the list), so
// they are shared, not copied.
func (p *Profile) Snapshot() *Profile {
	c := *p
	c.Stacks = p.Stacks[:len(p.Stacks):len(p.Stacks)]
	c.StackKinds = p.StackKinds[:len(p.StackKinds):len(p.StackKinds)]
	c.Events = p.Events[:len(p.Events):len(p.Events)]
	c.Threads = make(map[int]*Thread, len(p.Threads))
	for tid, th := range p.Threads {
		t := *th
		c.Threads[tid] = &t
	}
	c.methods = p.methods[:len(p.methods):len(p.methods)]
	c.uses = slices.Clone(p.uses)
	c.index, c.keyBuf = nil, nil // a snapshot is read-only
	p.sealed = len(p.Events)
	p.shared = true
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

// Duration is the time from Start to the last sample.
func (p *Profile) Duration() time.Duration { return p.end }
