package stackdump

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// writeTextFmt is WriteText as it was written with fmt, kept as the
// reference the faster writer must match byte for byte.
func writeTextFmt(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "PID %d: %s\n", r.PID, r.Command)
	for i := range r.Threads {
		ts := &r.Threads[i]
		fmt.Fprintf(bw, "\nTID %d %q state %s\n", ts.TID, ts.Name, ts.State)
		for n, f := range ts.Frames {
			fmt.Fprintf(bw, "#%-2d 0x%016x %s %s [%s]", n, f.PC, labelFmt(f), profile.ModuleBase(f.Module), frameMethod(f))
			if f.File != "" {
				fmt.Fprintf(bw, " at %s:%d", f.File, f.Line)
			}
			bw.WriteByte('\n')
		}
		var blocked *BlockedError
		switch {
		case errors.As(ts.Err, &blocked):
			fmt.Fprintf(bw, "    (%s)\n", blocked.Error())
		case !ts.Complete:
			reason := "stack truncated"
			if ts.Err != nil {
				reason += ": " + ts.Err.Error()
			}
			fmt.Fprintf(bw, "    (%s)\n", reason)
		}
	}
	for _, tid := range r.Exited {
		fmt.Fprintf(bw, "\nTID %d exited during the dump\n", tid)
	}
	if r.ProcessExited {
		fmt.Fprintf(bw, "\nprocess %d exited during the dump\n", r.PID)
	}
	return bw.Flush()
}

// labelFmt is profile.Frame.Label as it was written with fmt and string
// concatenation.
func labelFmt(f profile.Frame) string {
	name := f.Function
	if name == "" {
		if f.Module == "" {
			name = fmt.Sprintf("0x%x", f.PC)
		} else {
			name = profile.ModuleBase(f.Module) + "+0x" + fmt.Sprintf("%x", f.Offset)
		}
	}
	switch {
	case f.Function == "" && f.After != "":
		return name + " (after " + f.After + ")"
	case f.Function == "" || f.Inlined || f.Function == profile.SignalFrame:
		return name
	}
	return f.Function + "+0x" + fmt.Sprintf("%x", f.Offset)
}

// textCases are Results that exercise every branch of the text form.
func textCases() []*Result {
	blocked := &BlockedError{TID: 12, WaitChannel: "kernel_clone", Err: fmt.Errorf("thread 12: %w", ptrace.ErrThreadBlocked)}
	frames := []profile.Frame{
		{PC: 0x7fad4435bf16, Function: "__futex_abstimed_wait_common64", Module: "/usr/lib/x86_64-linux-gnu/libc.so.6", Method: "regs", Inlined: true, File: "nptl/futex-internal.c", Line: 57},
		{PC: 0x7fad4435bf16, Function: "__futex_abstimed_wait_common", Offset: 0xc6, Module: "/usr/lib/x86_64-linux-gnu/libc.so.6", Method: "regs", File: "nptl/futex-internal.c", Line: 87},
		{PC: 0x55d0d2c7f76c, Function: "recurse_step", Offset: 0xc, Module: "/opt/app/chains-sframe3", Method: "sframe"},
		{PC: 0x7f00000064af, Module: "/lib/libc.so.6", Offset: 0x64af, After: "sleep", Method: "fp"},
		{PC: 0x7f00000064af, Module: "/lib/libc.so.6", Offset: 0x64af, Method: "cfi"},
		{PC: 0x7fff12345678, Function: profile.SignalFrame, Module: "[vdso]", Method: "cfi"},
		{PC: 0x1234, Method: "fp"},
		{PC: 0, Method: "regs"},
		{PC: ^uint64(0), Function: "ñame_ü<anonymous>::operator()", Offset: ^uint64(0), Module: "/a/b c/lib ü.so", Method: "tailcall", File: "src/ü dir/a b.cc", Line: 1 << 30},
		{PC: 0x400000, Function: "f", Module: "/", Method: "lr", File: "x.c"},
		{PC: 0x400000, Function: "main.main", Module: "relative/path/", Method: "gostack", File: "/abs/main.go", Line: -1},
	}
	many := make([]profile.Frame, 0, 120)
	for len(many) < 120 {
		many = append(many, frames...)
	}
	return []*Result{
		{PID: 1, Command: ""},
		{PID: 18937, Command: "./chains-sframe3 --flag 'q' \"dq\"", Threads: []ThreadStack{
			{TID: 18938, Name: "recurse", State: "S", Complete: true, Frames: frames},
			{TID: 18939, Name: "with \"quotes\" and \\ and \t tab\n", State: "R", Frames: frames[:3], Err: errors.New("no unwind info at 0x1234")},
			{TID: 18940, Name: "ünïcødé 名前", State: "T", Frames: many},
			{TID: 18941, Name: "bad utf8 \xff\xfe", State: "t", Frames: frames[5:]},
			{TID: 18942, Name: "ctl \x00\x01\x7f", State: "D", Err: blocked},
			{TID: 18943, Name: "", State: "", Err: &BlockedError{TID: 18943}},
			{TID: 18944, Name: "complete-with-err", State: "S", Complete: true, Err: errors.New("ignored")},
			{TID: 18945, Name: "empty", State: "S"},
			{TID: 18946, Name: "blocked, wrapped", State: "D", Err: fmt.Errorf("sampling: %w", blocked)},
		}, Exited: []int{18950, 18951}, ProcessExited: true},
		{PID: -5, Command: "neg", ProcessExited: true},
		{PID: 7, Command: "only exited", Exited: []int{8}},
	}
}

// TestWriteTextMatchesFmt: the text dump is byte for byte what the fmt
// writer printed, over every branch and over random frames.
func TestWriteTextMatchesFmt(t *testing.T) {
	t.Parallel()
	cases := textCases()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		cases = append(cases, randomResult(rng))
	}
	cases = append(cases, manyThreads(1000))
	for i, r := range cases {
		var got, want bytes.Buffer
		if err := WriteText(&got, r); err != nil {
			t.Fatal(err)
		}
		if err := writeTextFmt(&want, r); err != nil {
			t.Fatal(err)
		}
		checkSameBytes(t, i, got.Bytes(), want.Bytes())
	}
}

// A failing writer's error is returned, and nothing is written after it.
func TestWriteTextError(t *testing.T) {
	t.Parallel()
	fw := &failingWriter{failAt: 2}
	err := WriteText(fw, manyThreads(1000))
	if !errors.Is(err, errWrite) || fw.calls != 2 {
		t.Fatalf("err %v after %d writes, want %v at the second", err, fw.calls, errWrite)
	}
}

var errWrite = errors.New("write failed")

type failingWriter struct{ calls, failAt int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.calls++
	if f.calls >= f.failAt {
		return 0, errWrite
	}
	return len(p), nil
}

// randomResult is a Result of random threads and frames: names and paths
// of any bytes, any numbers.
func randomResult(rng *rand.Rand) *Result {
	str := func() string {
		alphabet := []string{"a", "Z", "_", " ", "\"", "\\", "\n", "\t", "\x00", "\xff", "é", "名", "/", ".", ":", "+", "(", "\u2028", "\U0001F600"}
		var b []byte
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		return string(b)
	}
	num := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return uint64(rng.IntN(20))
		case 1:
			return ^uint64(0) - uint64(rng.IntN(3))
		}
		return rng.Uint64() >> rng.IntN(64)
	}
	methods := []string{"regs", "sframe", "cfi", "fp", "signal", "tailcall", "lr", "gostack", "backchain", ""}
	r := &Result{PID: rng.IntN(1 << 22), Command: str(), ProcessExited: rng.IntN(2) == 0}
	for range rng.IntN(30) {
		ts := ThreadStack{TID: rng.IntN(1 << 22), Name: str(), State: str(), Complete: rng.IntN(2) == 0}
		switch rng.IntN(4) {
		case 0:
			ts.Err = errors.New(str())
		case 1:
			ts.Err = &BlockedError{TID: ts.TID, WaitChannel: str()}
		}
		for range rng.IntN(40) {
			f := profile.Frame{PC: num(), Offset: num(), Method: methods[rng.IntN(len(methods))], Inlined: rng.IntN(4) == 0}
			if rng.IntN(4) > 0 {
				f.Function = str()
			}
			if rng.IntN(5) == 0 {
				f.Function = profile.SignalFrame
			}
			if rng.IntN(4) > 0 {
				f.Module = str()
			}
			if rng.IntN(3) == 0 {
				f.After = str()
			}
			if rng.IntN(2) == 0 {
				f.File, f.Line = str(), int(int32(rng.Uint32()))
			}
			ts.Frames = append(ts.Frames, f)
		}
		r.Threads = append(r.Threads, ts)
	}
	for range rng.IntN(3) {
		r.Exited = append(r.Exited, rng.IntN(1<<22))
	}
	return r
}

// manyThreads is a dump of n threads shaped like bench/mixthreads.c's
// (n 4): four spinners, the rest blocked in libc's pthread_cond_wait and
// nanosleep and in raw read and futex system calls, with file:line and
// inlined frames as libc's debug file gives them.
func manyThreads(n int) *Result {
	const libc, prog = "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/local/bin/mixthreads"
	start := []profile.Frame{
		{PC: 0x5587682ae4c2, Function: "thread_main", Offset: 0x42, Module: prog, Method: "cfi", File: "bench/mixthreads.c", Line: 63},
		{PC: 0x7fad4435f1f5, Function: "start_thread", Offset: 0x305, Module: libc, Method: "cfi", File: "nptl/pthread_create.c", Line: 442},
		{PC: 0x7fad443df8ec, Function: "clone3", Offset: 0x2c, Module: libc, Method: "cfi", File: "../sysdeps/unix/sysv/linux/x86_64/clone3.S", Line: 81},
	}
	kinds := [][]profile.Frame{
		{ // spinning
			{PC: 0x5587682ae397, Function: "mix_spin", Offset: 0x7, Module: prog, Method: "regs", File: "bench/mixthreads.c", Line: 27},
		},
		{ // pthread_cond_wait
			{PC: 0x7fad4435bf16, Function: "__futex_abstimed_wait_common64", Module: libc, Method: "regs", Inlined: true, File: "nptl/futex-internal.c", Line: 57},
			{PC: 0x7fad4435bf16, Function: "__futex_abstimed_wait_common", Offset: 0xc6, Module: libc, Method: "regs", File: "nptl/futex-internal.c", Line: 87},
			{PC: 0x7fad4435bf7b, Function: "__futex_abstimed_wait_cancelable64", Offset: 0xb, Module: libc, Method: "tailcall", File: "nptl/futex-internal.c", Line: 139},
			{PC: 0x7fad4435e5d8, Function: "__pthread_cond_wait_common", Module: libc, Method: "cfi", Inlined: true, File: "nptl/pthread_cond_wait.c", Line: 503},
			{PC: 0x7fad4435e5d8, Function: "pthread_cond_wait", Offset: 0x1e8, Module: libc, Method: "cfi", File: "nptl/pthread_cond_wait.c", Line: 618},
			{PC: 0x5587682ae3db, Function: "mix_cond", Offset: 0x2b, Module: prog, Method: "cfi", File: "bench/mixthreads.c", Line: 34},
		},
		{ // nanosleep
			{PC: 0x7fad443a9a65, Function: "__GI___clock_nanosleep", Offset: 0xc5, Module: libc, Method: "regs", File: "../sysdeps/unix/sysv/linux/clock_nanosleep.c", Line: 48},
			{PC: 0x7fad443b5bb3, Function: "__GI___nanosleep", Offset: 0x13, Module: libc, Method: "cfi", File: "../sysdeps/unix/sysv/linux/nanosleep.c", Line: 25},
			{PC: 0x5587682ae40e, Function: "mix_sleep", Offset: 0x1e, Module: prog, Method: "cfi", File: "bench/mixthreads.c", Line: 42},
		},
		{ // raw read
			{PC: 0x7fad443d7959, Function: "syscall", Offset: 0x19, Module: libc, Method: "regs", File: "../sysdeps/unix/sysv/linux/x86_64/syscall.S", Line: 38},
			{PC: 0x5587682ae440, Function: "mix_read", Offset: 0x20, Module: prog, Method: "cfi", File: "bench/mixthreads.c", Line: 50},
		},
		{ // raw futex
			{PC: 0x7fad443d7959, Function: "syscall", Offset: 0x19, Module: libc, Method: "regs", File: "../sysdeps/unix/sysv/linux/x86_64/syscall.S", Line: 38},
			{PC: 0x5587682ae479, Function: "mix_futex", Offset: 0x29, Module: prog, Method: "cfi", File: "bench/mixthreads.c", Line: 57},
		},
	}
	r := &Result{PID: 28762, Command: "/usr/local/bin/mixthreads 1000 4"}
	for i := range n {
		k := 0
		if i >= 4 {
			k = 1 + (i-4)%4
		}
		frames := append(append([]profile.Frame(nil), kinds[k]...), start...)
		state := "S"
		if k == 0 {
			state = "R"
		}
		r.Threads = append(r.Threads, ThreadStack{TID: 28763 + i, Name: "mixthreads", State: state, Complete: true, Frames: frames})
	}
	return r
}

// BenchmarkWriteText prints a 1,000-thread dump (manyThreads) to a writer
// that discards it, as `stacktop dump >/dev/null` does.
func BenchmarkWriteText(b *testing.B) {
	r := manyThreads(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteText(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteTextFmt is the fmt writer WriteText replaced, for
// comparison.
func BenchmarkWriteTextFmt(b *testing.B) {
	r := manyThreads(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := writeTextFmt(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteJSON prints the same dump as JSON (--json).
func BenchmarkWriteJSON(b *testing.B) {
	r := manyThreads(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteJSON(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

// checkSameBytes fails case i if got and want differ, showing both around
// the first byte that differs.
func checkSameBytes(t *testing.T, i int, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	t.Errorf("case %d: output differs at byte %d:\ngot  %q\nwant %q", i, n, got[max(0, n-80):min(len(got), n+80)], want[max(0, n-80):min(len(want), n+80)])
}
