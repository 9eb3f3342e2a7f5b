package gdbstack

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

func TestParseFrame(t *testing.T) {
	tests := []struct {
		line string
		want Frame
	}{
		{"#0  0x000055c8c8780d63 in asm_entry_spin ()",
			Frame{0, 0x55c8c8780d63, "asm_entry_spin", ""}},
		{"#10 0x00007fb4422911f5 in start_thread (arg=...) at ./nptl/pthread_create.c:442",
			Frame{10, 0x7fb4422911f5, "start_thread", ""}},
		{"#11 0x00007f9f1aea58ec in ?? () from /lib/x86_64-linux-gnu/libc.so.6",
			Frame{11, 0x7f9f1aea58ec, "??", "/lib/x86_64-linux-gnu/libc.so.6"}},
		{"#1  0x00007f9f1ae6fe53 in nanosleep () from /lib/x86_64-linux-gnu/libc.so.6",
			Frame{1, 0x7f9f1ae6fe53, "nanosleep", "/lib/x86_64-linux-gnu/libc.so.6"}},
		{"#2  <signal handler called>", Frame{2, 0, SignalFrame, ""}},
		{"#0  recurse_leaf () at chains.c:77", Frame{0, 0, "recurse_leaf", ""}},
		{"#3  0x0000000000401136 in (anonymous namespace)::run(int) (x=...) at a.cc:3",
			Frame{3, 0x401136, "(anonymous namespace)::run(int)", ""}},
		{"#4  0x0000000000401136 in std::function<void (int)>::operator()(int) const (this=0x1, __args#0=2) from /usr/lib/libx.so",
			Frame{4, 0x401136, "std::function<void (int)>::operator()(int) const", "/usr/lib/libx.so"}},
		{`#5  0x0000000000401136 in puts (s=0x402004 "a)b\"(") at puts.c:9`,
			Frame{5, 0x401136, "puts", ""}},
		{"#6  0x0000000000401030 in pthread_cond_wait@plt ()",
			Frame{6, 0x401030, "pthread_cond_wait@plt", ""}},
	}
	for _, tt := range tests {
		got, err := parseFrame(tt.line)
		if err != nil {
			t.Errorf("parseFrame(%q): %v", tt.line, err)
			continue
		}
		if got != tt.want {
			t.Errorf("parseFrame(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

func TestParseFrameErrors(t *testing.T) {
	for _, line := range []string{
		"#",
		"#x  0x1 in f ()",
		"#-1 0x1 in f ()",
		"#0  0xzz in f ()",
		"#0  0x1234",
		"#0  0x1234 in f",
		"#0  0x1234 in ()",
		"#0  0x1234 in f (a=(1)",
		"#0  0x1234 in f ( from lib",
		"#99999999999999999999 0x1 in f ()",
		"#0  0x1ffffffffffffffff in f ()",
	} {
		if f, err := parseFrame(line); err == nil {
			t.Errorf("parseFrame(%q) = %+v, want an error", line, f)
		}
	}
}

func TestParseThreadHeader(t *testing.T) {
	tests := []struct {
		line string
		want Thread
		ok   bool
	}{
		{`Thread 10 (Thread 0x7f5a0ce7d6c0 (LWP 10109) "asmentry"):`, Thread{TID: 10109, Num: 10, Name: "asmentry"}, true},
		{`Thread 2 (LWP 10101 "recurse"):`, Thread{TID: 10101, Num: 2, Name: "recurse"}, true},
		{`Thread 1 (process 10099):`, Thread{TID: 10099, Num: 1}, true},
		{`Thread 3 (Thread 0x7f (LWP 77)):`, Thread{TID: 77, Num: 3}, true},
		{`Thread 0x7f5a0ce7d6c0 (LWP 10109) exited`, Thread{}, false},
		{`Thread 1 (LWP x):`, Thread{}, false},
		{`Thread 1 (LWP 0):`, Thread{}, false},
		{`Thread  (LWP 5):`, Thread{}, false},
	}
	for _, tt := range tests {
		got, ok := parseThreadHeader(tt.line)
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseThreadHeader(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		out  string
		line int
	}{
		{"Thread 1 (LWP 5 \"a\"):\n#0  0x1 in f ()\n#2  0x2 in g ()\n", 3},
		{"Thread 1 (LWP 5 \"a\"):\n#0  0x1 in f ()\n\nThread 2 (LWP 5 \"a\"):\n", 4},
		{"Thread 1 (LWP 5 \"a\"):\n#0  garbage\n", 2},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.out))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line != tt.line {
			t.Errorf("Parse(%q) error %v, want a SyntaxError at line %d", tt.out, err, tt.line)
		}
	}
}

// TestParseSaved parses real gdb 13 output: chains-sframe3 with libc debug
// information installed (libc frames "at FILE:LINE") and chains-fp without
// (libc frames "?? () from LIB").
func TestParseSaved(t *testing.T) {
	tests := []struct {
		file    string
		libTail []Frame // the last two frames of the "recurse" thread, PCs zeroed
	}{
		{"chains-sframe3.gdb.txt", []Frame{{10, 0, "start_thread", ""}, {11, 0, "clone3", ""}}},
		{"chains-fp-nodebug.gdb.txt", []Frame{
			{10, 0, "??", "/lib/x86_64-linux-gnu/libc.so.6"},
			{11, 0, "??", "/lib/x86_64-linux-gnu/libc.so.6"}}},
	}
	for _, tt := range tests {
		out, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		threads, err := Parse(out)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if len(threads) != 10 {
			t.Fatalf("%s: %d threads, want 10", tt.file, len(threads))
		}
		for i := 1; i < len(threads); i++ {
			if threads[i-1].TID >= threads[i].TID {
				t.Errorf("%s: threads not sorted by TID", tt.file)
			}
		}
		byName := map[string]Thread{}
		for _, th := range threads {
			byName[th.Name] = th
		}
		rec := byName["recurse"]
		want := []string{"recurse_leaf"}
		for i := 0; i < 8; i++ {
			want = append(want, "recurse_step")
		}
		want = append(want, "recurse_thread")
		if got := names(rec.Frames[:len(want)]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: recurse thread %v, want prefix %v", tt.file, got, want)
		}
		for _, f := range rec.Frames[:len(want)] {
			if f.PC == 0 || f.Library != "" {
				t.Errorf("%s: fixture frame %+v", tt.file, f)
			}
		}
		tail := append([]Frame(nil), rec.Frames[len(want):]...)
		for i := range tail {
			tail[i].PC = 0
		}
		if !reflect.DeepEqual(tail, tt.libTail) {
			t.Errorf("%s: recurse thread ends %+v, want %+v", tt.file, tail, tt.libTail)
		}
		if got := names(byName["tailcall"].Frames[:3]); !reflect.DeepEqual(got, []string{"tail_b", "tail_entry", "tailcall_thread"}) {
			t.Errorf("%s: tailcall thread %v", tt.file, got)
		}
		if m := ByTID(threads); len(m) != 10 || len(m[rec.TID]) != len(rec.Frames) {
			t.Errorf("%s: ByTID lost threads or frames", tt.file)
		}
	}
}

func TestParseStopped(t *testing.T) {
	out := "Thread 1 (LWP 5 \"a\"):\n#0  0x1 in f ()\n#1  0x0 in ?? ()\nBacktrace stopped: previous frame inner to this frame (corrupt stack?)\n"
	threads, err := Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) != 1 || len(threads[0].Frames) != 2 || threads[0].Stopped != "previous frame inner to this frame (corrupt stack?)" {
		t.Errorf("Parse = %+v", threads)
	}
}

func names(frames []Frame) []string {
	var s []string
	for _, f := range frames {
		s = append(s, f.Function)
	}
	return s
}

// firstThreads returns gdb's output up to its nth "Thread" block included:
// a small seed (the fuzzer minimises every input that finds new code, and
// a 4 KB seed keeps it minimising instead of fuzzing for seconds).
func firstThreads(out []byte, n int) []byte {
	at := 0
	for i := 0; i <= n; i++ {
		j := bytes.Index(out[at:], []byte("\nThread "))
		if j < 0 {
			return out
		}
		if i == n {
			return out[:at+j+1]
		}
		at += j + 1
	}
	return out
}

func FuzzParse(f *testing.F) {
	fuzzbudget.Limit(f)
	for _, name := range []string{"chains-sframe3.gdb.txt", "chains-fp-nodebug.gdb.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(firstThreads(b, 2))
	}
	f.Add([]byte("Thread 1 (LWP 5 \"a\"):\n#0  0x1 in f (x=\"(\\\")\") from l\n#1  <signal handler called>\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		threads, err := Parse(out)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line < 1 || !strings.Contains(err.Error(), "line") {
				t.Fatalf("error %v is not a SyntaxError with a line", err)
			}
			return
		}
		seen := map[int]bool{}
		for _, th := range threads {
			if th.TID <= 0 || seen[th.TID] {
				t.Fatalf("bad or repeated TID %d", th.TID)
			}
			seen[th.TID] = true
			for i, fr := range th.Frames {
				if fr.Index != i || fr.Function == "" {
					t.Fatalf("thread %d frame %d: %+v", th.TID, i, fr)
				}
			}
		}
	})
}
