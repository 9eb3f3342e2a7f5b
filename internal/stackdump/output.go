package stackdump

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"stacktop/profile"
)

// WriteText prints the dump in the pstack / eu-stack style: per thread its
// TID, name and state, then one line per frame with its index, address,
// function+offset, module and the unwind method that found it.
//
// The text is appended to one buffer with strconv and written out in
// chunks of textChunk: a 1,000-thread dump is 8,000 lines, and fmt per
// frame (its verbs, its interface boxing, a string per Label) cost several
// times what the bytes do.
func WriteText(w io.Writer, r *Result) error {
	b := make([]byte, 0, textChunk+4<<10)
	flush := func() error {
		_, err := w.Write(b)
		b = b[:0]
		return err
	}
	b = append(b, "PID "...)
	b = strconv.AppendInt(b, int64(r.PID), 10)
	b = append(b, ": "...)
	b = append(b, r.Command...)
	b = append(b, '\n')
	for i := range r.Threads {
		ts := &r.Threads[i]
		b = append(b, "\nTID "...)
		b = strconv.AppendInt(b, int64(ts.TID), 10)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, ts.Name) // as fmt's %q
		b = append(b, " state "...)
		b = append(b, ts.State...)
		b = append(b, '\n')
		for n := range ts.Frames {
			b = appendFrameLine(b, n, &ts.Frames[n])
			if len(b) >= textChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if ts.Err != nil || !ts.Complete {
			b = appendStackEnd(b, ts)
		}
	}
	for _, tid := range r.Exited {
		b = append(b, "\nTID "...)
		b = strconv.AppendInt(b, int64(tid), 10)
		b = append(b, " exited during the dump\n"...)
	}
	if r.ProcessExited {
		b = append(b, "\nprocess "...)
		b = strconv.AppendInt(b, int64(r.PID), 10)
		b = append(b, " exited during the dump\n"...)
	}
	return flush()
}

// appendStackEnd appends why ts's stack ends early: the thread could not
// be stopped, or its walk stopped short.
func appendStackEnd(b []byte, ts *ThreadStack) []byte {
	var blocked *BlockedError
	switch {
	case errors.As(ts.Err, &blocked):
		b = append(b, "    ("...)
		b = append(b, blocked.Error()...)
		return append(b, ")\n"...)
	case !ts.Complete:
		b = append(b, "    (stack truncated"...)
		if ts.Err != nil {
			b = append(b, ": "...)
			b = append(b, ts.Err.Error()...)
		}
		return append(b, ")\n"...)
	}
	return b
}

// textChunk is how much text WriteText gathers before each write.
const textChunk = 64 << 10

// appendFrameLine appends frame n's line: "#%-2d 0x%016x %s %s [%s]" of
// its index, PC, label, module and method, then " at FILE:LINE" when it
// has a file.
func appendFrameLine(b []byte, n int, f *profile.Frame) []byte {
	b = append(b, '#')
	b = strconv.AppendInt(b, int64(n), 10)
	if n >= 0 && n < 10 {
		b = append(b, ' ') // %-2d
	}
	b = append(b, " 0x"...)
	var hex [16]byte
	pc := f.PC
	for i := len(hex) - 1; i >= 0; i-- {
		hex[i] = "0123456789abcdef"[pc&0xf]
		pc >>= 4
	}
	b = append(b, hex[:]...)
	b = append(b, ' ')
	b = f.AppendLabel(b)
	b = append(b, ' ')
	b = append(b, profile.ModuleBase(f.Module)...)
	b = append(b, " ["...)
	b = append(b, frameMethod(*f)...)
	b = append(b, ']')
	if f.File != "" {
		b = append(b, " at "...)
		b = append(b, f.File...)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(f.Line), 10)
	}
	return append(b, '\n')
}

// frameMethod is the unwind method, or "inline" for a frame that exists
// only in the debug information.
func frameMethod(f profile.Frame) string {
	if f.Inlined {
		return "inline"
	}
	return f.Method
}

// WriteSummary prints the pause and wall-time line that goes to stderr.
func WriteSummary(w io.Writer, r *Result) {
	for _, n := range r.Notes {
		fmt.Fprintf(w, "stacktop: note: %s\n", n)
	}
	if n := r.partlyLive(); n > 0 {
		fmt.Fprintf(w, "stacktop: note: %d threads' stacks were read partly after the thread resumed (beyond the copy taken while stopped): their outer frames may be of a later moment\n", n)
	}
	var unwinders string
	if len(r.Unwinders) > 0 {
		unwinders = "; unwinders " + strings.Join(r.Unwinders, ",")
	}
	if r.Pauses.Frozen > 0 {
		fmt.Fprintf(w, "stacktop: %d threads in %v; all threads frozen for %v%s\n",
			len(r.Threads), r.Wall.Round(1e3), r.Pauses.Frozen.Round(1e3), unwinders)
		return
	}
	fmt.Fprintf(w, "stacktop: %d threads in %v; each thread stopped min %v, median %v, max %v%s\n",
		len(r.Threads), r.Wall.Round(1e3), r.Pauses.Min.Round(100), r.Pauses.Median.Round(100), r.Pauses.Max.Round(100), unwinders)
}

// partlyLive counts the threads whose walk read some of their stack from
// the live process (ThreadStack.StackMissed).
func (r *Result) partlyLive() int {
	n := 0
	for i := range r.Threads {
		if r.Threads[i].StackMissed > 0 {
			n++
		}
	}
	return n
}

// The JSON document; its schema is documented in docs/dump.md ("--json"),
// which TestJSONSchemaDocumented keeps complete.
type jsonDump struct {
	PID           int          `json:"pid"`
	Command       string       `json:"command"`
	Threads       []jsonThread `json:"threads"`
	Exited        []int        `json:"exited_threads,omitempty"`
	ProcessExited bool         `json:"process_exited,omitempty"`
	Pauses        jsonPauses   `json:"pauses"`
	Unwinders     []string     `json:"unwinders,omitempty"`
}

type jsonThread struct {
	TID      int         `json:"tid"`
	Name     string      `json:"name"`
	State    string      `json:"state"`
	Complete bool        `json:"complete"`
	Error    string      `json:"error,omitempty"`
	StopNS   int64       `json:"stopped_ns"`
	Frames   []jsonFrame `json:"frames"`
}

type jsonFrame struct {
	PC       string `json:"pc"`
	Function string `json:"function,omitempty"`
	Offset   uint64 `json:"offset"`
	Module   string `json:"module,omitempty"`
	Method   string `json:"method"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Inlined  bool   `json:"inlined,omitempty"`
}

type jsonPauses struct {
	MinNS    int64 `json:"min_ns"`
	MedianNS int64 `json:"median_ns"`
	MaxNS    int64 `json:"max_ns"`
	FrozenNS int64 `json:"frozen_ns,omitempty"`
	WallNS   int64 `json:"wall_ns"`
}

// WriteJSON prints the dump as one JSON document.
func WriteJSON(w io.Writer, r *Result) error {
	doc := jsonDump{
		PID: r.PID, Command: r.Command, Exited: r.Exited, ProcessExited: r.ProcessExited, Unwinders: r.Unwinders,
		Threads: make([]jsonThread, 0, len(r.Threads)),
		Pauses: jsonPauses{
			MinNS: int64(r.Pauses.Min), MedianNS: int64(r.Pauses.Median), MaxNS: int64(r.Pauses.Max),
			FrozenNS: int64(r.Pauses.Frozen), WallNS: int64(r.Wall),
		},
	}
	for i := range r.Threads {
		ts := &r.Threads[i]
		jt := jsonThread{TID: ts.TID, Name: ts.Name, State: ts.State, Complete: ts.Complete,
			StopNS: int64(ts.Stopped), Frames: make([]jsonFrame, 0, len(ts.Frames))}
		if ts.Err != nil {
			jt.Error = ts.Err.Error()
		}
		for _, f := range ts.Frames {
			jt.Frames = append(jt.Frames, jsonFrame{
				PC: "0x" + strconv.FormatUint(f.PC, 16), Function: f.Function, Offset: f.Offset,
				Module: f.Module, Method: f.Method, File: f.File, Line: f.Line, Inlined: f.Inlined,
			})
		}
		doc.Threads = append(doc.Threads, jt)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
