package export

import (
	"bufio"
	"encoding/json"
	"io"
	"sort"
	"strconv"

	"codeberg.org/stacktop/stacktop/profile"
)

// speedscopeSchema is the value speedscope expects in "$schema"; it is how
// the viewer recognises its own format among the many it imports.
const speedscopeSchema = "https://www.speedscope.app/file-format-schema.json"

// speedscopeFrame is one entry of shared.frames.
type speedscopeFrame struct {
	Name string `json:"name"`
	File string `json:"file,omitempty"`
}

// speedscopeFrameKey identifies a frame for speedscope. Speedscope merges
// call-tree nodes by frame index, so two PCs in the same function must share
// one index; the line is left out for the same reason (it is the line of the
// sampled PC, not of the function, and would split main into one frame per
// call site).
type speedscopeFrameKey struct{ name, file string }

// noFramesName stands for a sample whose stack is empty (the unwinder got
// nothing), so its weight is still shown rather than dropped.
const noFramesName = "[no frames]"

// WriteSpeedscope writes the profile in speedscope's JSON file format: one
// "sampled" profile per thread (named "threadname (tid)", ordered by tid),
// each listing that thread's samples in time order so speedscope's Time
// Order view replays the recording. Weights are time: a sample stands for
// its weight in sampling periods, so the unit is "nanoseconds" and each
// weight is samples x period (the time on CPU in an on-CPU profile, wall
// time under --idle). A profile without a period (hand-built) counts
// samples, unit "samples". Samples are not laid out on a time axis
// (startValue is 0, each sample follows the previous one): sampling only
// sees a thread while it runs, so gaps would suggest a continuity the data
// does not have. Stacks are written root first, as the format requires.
// The busiest thread is the one shown on load.
func WriteSpeedscope(w io.Writer, p *profile.Profile) error {
	frameIndex := map[speedscopeFrameKey]int{}
	var frames []speedscopeFrame
	frameOf := func(name, file string) int {
		k := speedscopeFrameKey{name, file}
		i, ok := frameIndex[k]
		if !ok {
			i = len(frames)
			frameIndex[k] = i
			frames = append(frames, speedscopeFrame{Name: name, File: file})
		}
		return i
	}

	// Encode each interned stack once; events refer to stacks by id, so a
	// long recording of few distinct stacks costs little.
	stackJSON := make([][]byte, len(p.Stacks))
	encodeStack := func(id int32) []byte {
		if b := stackJSON[id]; b != nil {
			return b
		}
		stack := p.Stacks[id]
		b := []byte{'['}
		if len(stack) == 0 {
			b = strconv.AppendInt(b, int64(frameOf(noFramesName, "")), 10)
		}
		for i := len(stack) - 1; i >= 0; i-- { // leaf first -> root first
			f := stack[i]
			file := f.File
			if file == "" {
				file = f.Module
			}
			if i != len(stack)-1 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(frameOf(f.Name(), file)), 10)
		}
		b = append(b, ']')
		stackJSON[id] = b
		return b
	}

	type thread struct {
		tid    int
		events []profile.Event
		total  int64
	}
	byTID := map[int]*thread{}
	for _, e := range p.Events {
		if int(e.Stack) < 0 || int(e.Stack) >= len(p.Stacks) {
			continue // not a stack of this profile; nothing to draw
		}
		t := byTID[int(e.TID)]
		if t == nil {
			t = &thread{tid: int(e.TID)}
			byTID[int(e.TID)] = t
		}
		t.events = append(t.events, e)
		t.total += eventWeight(e)
		encodeStack(e.Stack) // fixes frame indices before shared.frames is written
	}
	threads := make([]*thread, 0, len(byTID))
	for _, t := range byTID {
		threads = append(threads, t)
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i].tid < threads[j].tid })
	active := 0
	for i, t := range threads {
		if t.total > threads[active].total {
			active = i
		}
	}

	unit, scale := "samples", int64(1)
	if ns := p.Period.Nanoseconds(); ns > 0 {
		unit, scale = "nanoseconds", ns
	}

	bw := bufio.NewWriter(w)
	str := func(s string) {
		b, _ := json.Marshal(s) // a string always marshals; invalid UTF-8 becomes U+FFFD
		bw.Write(b)
	}
	bw.WriteString(`{"$schema":`)
	str(speedscopeSchema)
	bw.WriteString(`,"exporter":"stacktop","name":`)
	name := "stacktop"
	if p.Command != "" {
		name = p.Command
	}
	str(name + " (pid " + strconv.Itoa(p.PID) + ")")
	bw.WriteString(`,"activeProfileIndex":`)
	bw.WriteString(strconv.Itoa(active))
	bw.WriteString(`,"shared":{"frames":`)
	if frames == nil {
		frames = []speedscopeFrame{}
	}
	fb, err := json.Marshal(frames)
	if err != nil {
		return err
	}
	bw.Write(fb)
	bw.WriteString(`},"profiles":[`)
	for i, t := range threads {
		if i > 0 {
			bw.WriteByte(',')
		}
		tname := "thread"
		if th := p.Threads[t.tid]; th != nil && th.Name != "" {
			tname = th.Name
		}
		bw.WriteString(`{"type":"sampled","name":`)
		str(tname + " (" + strconv.Itoa(t.tid) + ")")
		bw.WriteString(`,"unit":"` + unit + `","startValue":0,"endValue":`)
		bw.WriteString(strconv.FormatInt(t.total*scale, 10))
		bw.WriteString(`,"samples":[`)
		for j, e := range t.events {
			if j > 0 {
				bw.WriteByte(',')
			}
			bw.Write(stackJSON[e.Stack])
		}
		bw.WriteString(`],"weights":[`)
		for j, e := range t.events {
			if j > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString(strconv.FormatInt(eventWeight(e)*scale, 10))
		}
		bw.WriteString(`]}`)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// eventWeight is an event's sample count; Add stores at least 1, but a
// hand-built profile may not have gone through Add.
func eventWeight(e profile.Event) int64 {
	if e.Weight <= 0 {
		return 1
	}
	return int64(e.Weight)
}
