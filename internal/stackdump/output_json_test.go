package stackdump

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The JSON document, as encoding/json prints it (writeJSONEncoding): the
// reference of WriteJSON's bytes. Its schema is docs/dump.schema.json,
// which TestJSONSchemaCoversOutput keeps in step with these types.
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

// writeJSONEncoding is WriteJSON as it was written with encoding/json,
// kept as the reference the hand-written writer must match byte for byte.
func writeJSONEncoding(w io.Writer, r *Result) error {
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

// TestWriteJSONMatchesEncoding: the JSON dump is byte for byte what
// encoding/json printed of the document's types, over every branch and
// over random dumps, and it parses.
func TestWriteJSONMatchesEncoding(t *testing.T) {
	t.Parallel()
	cases := textCases()
	frozen := manyThreads(3)
	frozen.Pauses = Pauses{Min: 1, Median: 2, Max: 3, Frozen: 4}
	frozen.Unwinders = []string{"sframe", "cfi", "fp"}
	frozen.Exited = []int{}
	cases = append(cases, frozen)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		r := randomResult(rng)
		r.Pauses = Pauses{Min: randDuration(rng), Median: randDuration(rng), Max: randDuration(rng)}
		if rng.IntN(2) == 0 {
			r.Pauses.Frozen = randDuration(rng)
		}
		r.Wall = randDuration(rng)
		for range rng.IntN(3) {
			r.Unwinders = append(r.Unwinders, []string{"sframe", "cfi", "fp", "backchain", "<&>"}[rng.IntN(5)])
		}
		for i := range r.Threads {
			r.Threads[i].Stopped = randDuration(rng)
		}
		cases = append(cases, r)
	}
	cases = append(cases, manyThreads(1000))
	for i, r := range cases {
		var got, want bytes.Buffer
		if err := WriteJSON(&got, r); err != nil {
			t.Fatal(err)
		}
		if err := writeJSONEncoding(&want, r); err != nil {
			t.Fatal(err)
		}
		checkSameBytes(t, i, got.Bytes(), want.Bytes())
		if !json.Valid(got.Bytes()) {
			t.Errorf("case %d: not valid JSON", i)
		}
	}
}

func randDuration(rng *rand.Rand) time.Duration {
	if rng.IntN(3) == 0 {
		return 0
	}
	return time.Duration(rng.Int64() >> rng.IntN(63))
}

// Every string, byte by byte and rune by rune, is escaped as
// encoding/json escapes it.
func TestJSONStringEscaping(t *testing.T) {
	t.Parallel()
	var inputs []string
	for c := range 256 {
		inputs = append(inputs, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	for _, r := range []rune{0x7f, 0x80, 0xa0, 0xfeff, 0x2027, 0x2028, 0x2029, 0x202a, utf8.RuneError, utf8.MaxRune, 0x10000} {
		inputs = append(inputs, string(r), "<"+string(r)+">")
	}
	inputs = append(inputs, "", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x80", "ok\xe2\x80\xa8\xe2\x80\xa9&<>\"\\/", strings.Repeat("é\x00", 100))
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b := make([]byte, rng.IntN(16))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, string(b))
	}
	for _, s := range inputs {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var j jsonWriter
		j.str(s)
		if !bytes.Equal(j.b, want) {
			t.Errorf("%q: got %s, want %s", s, j.b, want)
		}
	}
}

// BenchmarkWriteJSONEncoding is the encoding/json writer WriteJSON
// replaced, for comparison.
func BenchmarkWriteJSONEncoding(b *testing.B) {
	r := manyThreads(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := writeJSONEncoding(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
