package stackdump

import (
	"codeberg.org/stacktop/stacktop/unwind"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"codeberg.org/stacktop/stacktop/profile"
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
			if errors.Is(ts.Err, unwind.ErrMaxDepth) {
				b = append(b, "; --max-depth raises it"...)
			}
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

// WriteJSON prints the dump as one JSON document, the one encoding/json
// prints of the document's types (output_json_test.go: jsonDump) with
// two-space indentation, written by hand: encoding/json's reflection and
// its indenting pass took 28 ms and 12 MB for a 1,000-thread dump. Its
// schema is docs/dump.schema.json (JSON Schema, versioned by its $id),
// which TestJSONSchemaCoversOutput and TestJSONSchemaValidatesDumps keep
// true; TestWriteJSONMatchesEncoding keeps the bytes those of
// encoding/json.
func WriteJSON(w io.Writer, r *Result) error {
	j := jsonWriter{b: make([]byte, 0, textChunk+4<<10), w: w}
	j.open('{')
	j.key("pid")
	j.b = strconv.AppendInt(j.b, int64(r.PID), 10)
	j.key("command")
	j.str(r.Command)
	j.key("threads")
	j.open('[')
	for i := range r.Threads {
		ts := &r.Threads[i]
		j.elem()
		j.open('{')
		j.key("tid")
		j.b = strconv.AppendInt(j.b, int64(ts.TID), 10)
		j.key("name")
		j.str(ts.Name)
		j.key("state")
		j.str(ts.State)
		j.key("complete")
		j.b = strconv.AppendBool(j.b, ts.Complete)
		if ts.Err != nil {
			if msg := ts.Err.Error(); msg != "" {
				j.key("error")
				j.str(msg)
			}
		}
		j.key("stopped_ns")
		j.b = strconv.AppendInt(j.b, int64(ts.Stopped), 10)
		j.key("frames")
		j.open('[')
		for n := range ts.Frames {
			j.elem()
			j.frame(&ts.Frames[n])
			if len(j.b) >= textChunk && j.flush() != nil {
				return j.err
			}
		}
		j.close(']')
		j.close('}')
	}
	j.close(']')
	if len(r.Exited) > 0 {
		j.key("exited_threads")
		j.open('[')
		for _, tid := range r.Exited {
			j.elem()
			j.b = strconv.AppendInt(j.b, int64(tid), 10)
		}
		j.close(']')
	}
	if r.ProcessExited {
		j.key("process_exited")
		j.b = append(j.b, "true"...)
	}
	j.key("pauses")
	j.open('{')
	j.key("min_ns")
	j.b = strconv.AppendInt(j.b, int64(r.Pauses.Min), 10)
	j.key("median_ns")
	j.b = strconv.AppendInt(j.b, int64(r.Pauses.Median), 10)
	j.key("max_ns")
	j.b = strconv.AppendInt(j.b, int64(r.Pauses.Max), 10)
	if r.Pauses.Frozen != 0 {
		j.key("frozen_ns")
		j.b = strconv.AppendInt(j.b, int64(r.Pauses.Frozen), 10)
	}
	j.key("wall_ns")
	j.b = strconv.AppendInt(j.b, int64(r.Wall), 10)
	j.close('}')
	if len(r.Unwinders) > 0 {
		j.key("unwinders")
		j.open('[')
		for _, u := range r.Unwinders {
			j.elem()
			j.str(u)
		}
		j.close(']')
	}
	j.close('}')
	j.b = append(j.b, '\n')
	j.flush()
	return j.err
}

// frame appends one frame's object.
func (j *jsonWriter) frame(f *profile.Frame) {
	j.open('{')
	j.key("pc")
	j.b = append(j.b, "\"0x"...)
	j.b = strconv.AppendUint(j.b, f.PC, 16)
	j.b = append(j.b, '"')
	if f.Function != "" {
		j.key("function")
		j.str(f.Function)
	}
	j.key("offset")
	j.b = strconv.AppendUint(j.b, f.Offset, 10)
	if f.Module != "" {
		j.key("module")
		j.str(f.Module)
	}
	j.key("method")
	j.str(f.Method)
	if f.File != "" {
		j.key("file")
		j.str(f.File)
	}
	if f.Line != 0 {
		j.key("line")
		j.b = strconv.AppendInt(j.b, int64(f.Line), 10)
	}
	if f.Inlined {
		j.key("inlined")
		j.b = append(j.b, "true"...)
	}
	j.close('}')
}

// jsonWriter appends JSON as encoding/json's Encoder does with
// SetIndent("", "  "): a value per line, nested two spaces deeper per
// level, an empty array or object as [] or {}.
type jsonWriter struct {
	b     []byte
	w     io.Writer
	err   error
	depth int
	empty bool // the array or object just opened has no member yet
}

func (j *jsonWriter) flush() error {
	if j.err == nil {
		_, j.err = j.w.Write(j.b)
	}
	j.b = j.b[:0]
	return j.err
}

func (j *jsonWriter) newline() {
	j.b = append(j.b, '\n')
	for range j.depth {
		j.b = append(j.b, "  "...)
	}
}

func (j *jsonWriter) open(c byte) {
	j.b = append(j.b, c)
	j.depth++
	j.empty = true
}

func (j *jsonWriter) close(c byte) {
	j.depth--
	if !j.empty {
		j.newline()
	}
	j.b = append(j.b, c)
	j.empty = false
}

// elem starts an array's element.
func (j *jsonWriter) elem() {
	if !j.empty {
		j.b = append(j.b, ',')
	}
	j.empty = false
	j.newline()
}

// key starts an object's member named k (which needs no escaping).
func (j *jsonWriter) key(k string) {
	j.elem()
	j.b = append(j.b, '"')
	j.b = append(j.b, k...)
	j.b = append(j.b, "\": "...)
}

// str appends s as a JSON string, escaped as encoding/json escapes it by
// default: quote, backslash and control characters, and also <, > and &
// (HTML-safe), U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
func (j *jsonWriter) str(s string) {
	const hex = "0123456789abcdef"
	b := append(j.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	j.b = append(b, '"')
}
