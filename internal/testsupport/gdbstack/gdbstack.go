package gdbstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Frame is one line of a gdb backtrace.
type Frame struct {
	Index int // gdb's frame number, 0 innermost

	// PC is the address gdb printed: for frame 0 the thread's pc, for
	// outer frames the return address (gdb prints the caller's pc, not
	// pc-1). Zero for "<signal handler called>", which has no address.
	PC uint64

	// Function is the symbol name gdb printed, "??" when it had none, or
	// "<signal handler called>" for a signal frame.
	Function string

	// Library is the file after "from" when gdb printed one: gdb names the
	// shared object of a frame that has no debug information. Frames of the
	// main executable, and of libraries with debug info (gdb then prints
	// "at FILE:LINE" instead), have an empty Library.
	Library string
}

// SignalFrame is the Function of the frame gdb prints for a signal
// trampoline.
const SignalFrame = "<signal handler called>"

// Thread is the backtrace of one thread.
type Thread struct {
	TID    int     // LWP id, the thread id in /proc/PID/task
	Num    int     // gdb's thread number
	Name   string  // thread name gdb printed, if any
	Frames []Frame // innermost first

	// Stopped is gdb's reason for ending the backtrace early, the text
	// after "Backtrace stopped: " (for example "previous frame identical
	// to this frame (corrupt stack?)"); empty when it reached the end.
	Stopped string
}

// Timeout bounds one gdb run of Backtrace.
var Timeout = 2 * time.Minute

// Backtrace returns the frames of every thread of process pid, keyed by
// thread id, as gdb sees them.
func Backtrace(pid int) (map[int][]Frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	threads, err := Threads(ctx, pid)
	if err != nil {
		return nil, err
	}
	return ByTID(threads), nil
}

// ByTID indexes threads' frames by thread id.
func ByTID(threads []Thread) map[int][]Frame {
	m := make(map[int][]Frame, len(threads))
	for _, t := range threads {
		m[t.TID] = t.Frames
	}
	return m
}

// Command returns the gdb command line Threads runs for pid.
func Command(pid int) []string {
	return []string{"gdb", "-nx", "-batch",
		// Before attaching: never ask a debuginfod server, never page.
		"-iex", "set debuginfod enabled off",
		"-iex", "set pagination off",
		"-p", strconv.Itoa(pid),
		"-ex", "set width 0",
		"-ex", "set print frame-info location-and-address",
		"-ex", "set print frame-arguments none",
		"-ex", "set print entry-values no",
		"-ex", "thread apply all bt",
	}
}

// Threads runs gdb on pid and returns every thread's backtrace, sorted by
// thread id.
func Threads(ctx context.Context, pid int) ([]Thread, error) {
	argv := Command(pid)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	threads, err := Parse(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gdbstack: pid %d: %w", pid, err)
	}
	if len(threads) == 0 {
		msg := strings.TrimSpace(stderr.String())
		if runErr != nil {
			return nil, fmt.Errorf("gdbstack: pid %d: gdb: %w: %s", pid, runErr, msg)
		}
		return nil, fmt.Errorf("gdbstack: pid %d: gdb printed no backtrace: %s", pid, msg)
	}
	// gdb exits non-zero when any -ex command failed; with threads parsed
	// the backtraces are still good.
	return threads, nil
}

// SyntaxError reports a line of gdb output that looks like a backtrace line
// but cannot be read.
type SyntaxError struct {
	Line int    // 1-based line number in the output
	Text string // the line
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("gdb output line %d: %s: %q", e.Line, e.Msg, e.Text)
}

// Parse reads the output of gdb's "thread apply all bt" (printed with the
// settings of Command) and returns the threads in the order of their thread
// ids. Lines outside thread blocks and lines that are neither a thread
// header, a frame nor a "Backtrace stopped" notice are skipped.
func Parse(out []byte) ([]Thread, error) {
	var threads []Thread
	var cur *Thread
	seen := map[int]bool{}
	for n, raw := range bytes.Split(out, []byte("\n")) {
		line := strings.TrimRight(string(raw), "\r")
		lineNo := n + 1
		switch {
		case strings.HasPrefix(line, "Thread "):
			t, ok := parseThreadHeader(line)
			if !ok {
				// "Thread 0x7f... (LWP 5) exited" and similar notices.
				continue
			}
			if seen[t.TID] {
				return nil, &SyntaxError{lineNo, line, "thread listed twice"}
			}
			seen[t.TID] = true
			threads = append(threads, t)
			cur = &threads[len(threads)-1]
		case strings.HasPrefix(line, "#"):
			if cur == nil {
				// gdb prints the attach location as a frame of the
				// current thread before "thread apply" starts: skip.
				continue
			}
			f, err := parseFrame(line)
			if err != nil {
				return nil, &SyntaxError{lineNo, line, err.Error()}
			}
			if f.Index != len(cur.Frames) {
				return nil, &SyntaxError{lineNo, line, fmt.Sprintf("frame #%d after %d frames", f.Index, len(cur.Frames))}
			}
			cur.Frames = append(cur.Frames, f)
		case strings.HasPrefix(line, "Backtrace stopped: "):
			if cur != nil {
				cur.Stopped = strings.TrimPrefix(line, "Backtrace stopped: ")
			}
		}
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i].TID < threads[j].TID })
	return threads, nil
}

// parseThreadHeader reads a "thread apply" header, in one of the shapes
//
//	Thread 2 (Thread 0x7f5a10e856c0 (LWP 10101) "recurse"):
//	Thread 2 (LWP 10101 "recurse"):
//	Thread 1 (process 10099):
//
// and reports false for any other line starting with "Thread ".
func parseThreadHeader(line string) (Thread, bool) {
	body, ok := strings.CutSuffix(line, "):")
	if !ok {
		return Thread{}, false
	}
	numText, rest, ok := strings.Cut(strings.TrimPrefix(body, "Thread "), " (")
	if !ok {
		return Thread{}, false
	}
	num, err := strconv.Atoi(numText)
	if err != nil || num < 0 {
		return Thread{}, false
	}
	t := Thread{Num: num}
	var idText string
	if _, after, ok := strings.Cut(rest, "LWP "); ok {
		idText = after
	} else if _, after, ok := strings.Cut(rest, "process "); ok {
		idText = after
	} else {
		return Thread{}, false
	}
	end := strings.IndexFunc(idText, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(idText)
	}
	t.TID, err = strconv.Atoi(idText[:end])
	if err != nil || t.TID <= 0 {
		return Thread{}, false
	}
	// The name is the last double-quoted string, if any.
	if j := strings.LastIndexByte(rest, '"'); j > 0 {
		if i := strings.LastIndexByte(rest[:j], '"'); i >= 0 {
			t.Name = rest[i+1 : j]
		}
	}
	return t, true
}

var (
	errNoIndex   = errors.New("no frame number")
	errNoAddress = errors.New("no address")
	errNoFunc    = errors.New("no function")
)

// parseFrame reads one frame line:
//
//	#N  0xADDR in FUNC (ARGS)[ at FILE:LINE| from LIB]
//	#N  <signal handler called>
//	#N  FUNC (ARGS)[ at FILE:LINE| from LIB]      (no address: pc at a line start)
//
// ARGS is "" or "name=..., name=..." with print frame-arguments none, but
// any balanced text is accepted, and so are C++ names holding spaces and
// parentheses.
func parseFrame(line string) (Frame, error) {
	var f Frame
	idx, rest, ok := strings.Cut(line[1:], " ")
	if !ok {
		return f, errNoIndex
	}
	var err error
	if f.Index, err = strconv.Atoi(idx); err != nil || f.Index < 0 {
		return f, errNoIndex
	}
	rest = strings.TrimLeft(rest, " ")
	if rest == SignalFrame {
		f.Function = SignalFrame
		return f, nil
	}
	if strings.HasPrefix(rest, "0x") {
		addr, after, ok := strings.Cut(rest, " in ")
		if !ok {
			return f, errNoFunc
		}
		if f.PC, err = strconv.ParseUint(addr[2:], 16, 64); err != nil {
			return f, errNoAddress
		}
		rest = after
	}
	f.Function, f.Library, err = splitCall(rest)
	return f, err
}

// splitCall splits "FUNC (ARGS)[ at FILE:LINE| from LIB]" into FUNC and LIB.
// The argument list is the parenthesised group that ends at the last ')'
// followed by nothing, " at " or " from "; it is matched backwards, so
// parentheses inside FUNC (C++ "(anonymous namespace)", "operator()") stay
// part of the name.
func splitCall(s string) (fn, lib string, err error) {
	end := -1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != ')' {
			continue
		}
		tail := s[i+1:]
		if tail == "" || strings.HasPrefix(tail, " at ") || strings.HasPrefix(tail, " from ") {
			end = i
			if after, ok := strings.CutPrefix(tail, " from "); ok {
				lib = after
			}
			break
		}
	}
	if end < 0 {
		return "", "", errors.New("no argument list")
	}
	depth := 0
	inQuote := false
	for i := end; i >= 0; i-- {
		c := s[i]
		if c == '"' && !escaped(s, i) {
			inQuote = !inQuote
			continue
		}
		if inQuote {
			continue
		}
		switch c {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				fn = strings.TrimRight(s[:i], " ")
				if fn == "" {
					return "", "", errNoFunc
				}
				if !balanced(fn) {
					return "", "", errors.New("unbalanced parentheses")
				}
				return fn, lib, nil
			}
		}
	}
	return "", "", errors.New("unbalanced argument list")
}

// balanced reports whether the parentheses in a function name pair up, as
// in "(anonymous namespace)::f(int)".
func balanced(s string) bool {
	depth := 0
	for _, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// escaped reports whether s[i] is preceded by an odd number of backslashes.
func escaped(s string, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}
