package procmaps

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// statLine builds a 52-field stat line with the given comm and state and
// utime/stime 7/3.
func statLine(pid, comm, state string) string {
	f := []string{pid, "(" + comm + ")", state, "1", "2", "3", "0", "-1", "4194560", "100", "0", "0", "0",
		"7", "3", "0", "0", "20", "0", "5", "0", "123456", "1000", "200", "18446744073709551615"}
	for len(f) < 52 {
		f = append(f, "0")
	}
	f[38] = "1" // processor
	return strings.Join(f, " ") + "\n"
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		comm       string
		state      byte
	}{
		{"plain", statLine("42", "sleep", "S"), "sleep", 'S'},
		{"spaces", statLine("42", "Web Content", "R"), "Web Content", 'R'},
		{"paren inside", statLine("42", "a) (b", "D"), "a) (b", 'D'},
		{"fake fields inside", statLine("42", ") R 1 2 3 (", "t"), ") R 1 2 3 (", 't'},
		{"empty comm", statLine("42", "", "Z"), "", 'Z'},
		{"trailing paren", statLine("42", "x)", "T"), "x)", 'T'},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseStat([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			want := Stat{PID: 42, Comm: tt.comm, State: tt.state, PPID: 1, Flags: 4194560, UTime: 7, STime: 3, NumThreads: 5, StartTime: 123456, Processor: 1}
			if s != want {
				t.Errorf("got  %+v\nwant %+v", s, want)
			}
		})
	}
	short := "42 (x) S 1 2 3 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 5 0 123456\n"
	s, err := ParseStat([]byte(short))
	if err != nil || s.Processor != -1 || s.StartTime != 123456 {
		t.Errorf("22-field line: %+v, %v", s, err)
	}
}

func TestParseStatErrors(t *testing.T) {
	good := statLine("42", "x", "S")
	tests := []struct {
		name, line string
		field      int
	}{
		{"no paren", "42 x S 1", 2},
		{"no close", "42 (x S 1 2 3", 2},
		{"bad pid", "4x2 (x) S" + good[8:], 1},
		{"signed pid", "+42 (x) S" + good[8:], 1},
		{"nothing after comm", "42 (x)", 3},
		{"too few", "42 (x) S 1 2 3", 7}, // the first missing field
		{"bad state", strings.Replace(good, ") S ", ") SS ", 1), 3},
		{"bad utime", strings.Replace(good, " 7 3 ", " 7x 3 ", 1), 14},
		{"bad flags", strings.Replace(good, " 4194560 ", " 0x400000 ", 1), 9},
		{"negative stime", strings.Replace(good, " 7 3 ", " 7 -3 ", 1), 15},
		{"double space", strings.Replace(good, " 7 3 ", " 7  3 ", 1), 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStat([]byte(tt.line))
			var se *StatError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want *StatError", err)
			}
			if se.Field != tt.field {
				t.Errorf("got %v, want field %d", se, tt.field)
			}
		})
	}
}

func TestParseSchedstat(t *testing.T) {
	s, err := ParseSchedstat([]byte("123456789 42 17\n"))
	if err != nil || s != (Schedstat{RunNS: 123456789, WaitNS: 42, Timeslices: 17}) {
		t.Errorf("got %+v, %v", s, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "1 x 3", "1 2 -3", "+1 2 3"} {
		if _, err := ParseSchedstat([]byte(bad)); err == nil {
			t.Errorf("ParseSchedstat(%q) succeeded", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add([]byte(statLine("42", "a) (b", "S")))
	f.Add([]byte("1 (x) S 1 2 3"))
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if ref, rerr := parseStatSplit(b); ref != s || fmt.Sprint(rerr) != fmt.Sprint(err) {
			t.Fatalf("ParseStat = %+v, %v; with bytes.Split %+v, %v", s, err, ref, rerr)
		}
		if err != nil {
			var se *StatError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *StatError", err)
			}
			return
		}
		if s.PID < 0 || len(s.Comm) > len(b) {
			t.Fatalf("implausible %+v", s)
		}
	})
}

func FuzzParseSchedstat(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add([]byte("123456789 42 17\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseSchedstat(b); err != nil {
			var se *StatError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *StatError", err)
			}
		}
	})
}

// lockedThread runs fn on a goroutine locked to its own OS thread and
// returns the thread's TID; the test's end closes fn's channel, which
// ends it, and waits for the thread to be gone (lockedThreadsGone).
func lockedThread(t *testing.T, fn func(stop <-chan struct{})) int {
	t.Helper()
	tidc := make(chan int)
	stop := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		tidc <- unix.Gettid()
		fn(stop)
	}()
	tid := <-tidc
	exiting := lockedThreadsOf(t)
	t.Cleanup(func() {
		close(stop)
		// The main thread (the runtime's m0, tid == pid) never exits: the
		// runtime parks it instead.
		if tid != os.Getpid() {
			exiting.add(tid)
		}
	})
	return tid
}

// lockedThreadsGone waits, at a test's very end, for the threads its
// lockedThread calls ended to be gone: a test after it lists the
// process's threads, and the kernel's listing of a task directory skips
// live threads while others exit (it resumes by position when the last
// thread it returned is gone). One wait for all: thousands of threads end
// side by side.
type lockedThreadsGone struct {
	mu   sync.Mutex
	tids []int
}

var (
	lockedThreadsMu sync.Mutex
	lockedThreads   = map[*testing.T]*lockedThreadsGone{}
)

func lockedThreadsOf(t *testing.T) *lockedThreadsGone {
	lockedThreadsMu.Lock()
	defer lockedThreadsMu.Unlock()
	g := lockedThreads[t]
	if g == nil {
		g = &lockedThreadsGone{}
		lockedThreads[t] = g
		// Registered before any thread's close: it runs after them all.
		t.Cleanup(func() {
			lockedThreadsMu.Lock()
			delete(lockedThreads, t)
			lockedThreadsMu.Unlock()
			g.wait(t)
		})
	}
	return g
}

func (g *lockedThreadsGone) add(tid int) {
	g.mu.Lock()
	g.tids = append(g.tids, tid)
	g.mu.Unlock()
}

func (g *lockedThreadsGone) wait(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	for _, tid := range g.tids {
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		for {
			if _, err := os.Stat(task); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("thread %d still there 10 s after its goroutine ended", tid)
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func TestThreadsSelf(t *testing.T) {
	pid := os.Getpid()
	named := lockedThread(t, func(stop <-chan struct{}) {
		// prctl names only the calling thread.
		name := []byte("a) (b c)\x00")
		unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_NAME, uintptr(unsafePointer(&name[0])), 0)
		<-stop
	})
	busy := lockedThread(t, func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			//lint:ignore SA5004 the thread must spin: it is the busy one.
			default:
			}
		}
	})
	tids, err := Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tids, pid) || !slices.Contains(tids, busy) || !slices.Contains(tids, named) {
		t.Fatalf("Threads(%d) = %v, missing %d, %d or %d", pid, tids, pid, busy, named)
	}
	if !slices.IsSorted(tids) {
		t.Errorf("not sorted: %v", tids)
	}

	// The name is set asynchronously by the thread; wait for it.
	var ti ThreadInfo
	for i := 0; i < 100; i++ {
		if ti, err = ReadThreadInfo(pid, named); err != nil || ti.Name == "a) (b c)" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || ti.Name != "a) (b c)" || ti.TID != named {
		t.Errorf("named thread: %+v, %v", ti, err)
	}

	before, err := ReadThreadInfo(pid, busy)
	if err != nil {
		t.Fatal(err)
	}
	var after ThreadInfo
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		if after, err = ReadThreadInfo(pid, busy); err != nil {
			t.Fatal(err)
		}
		if after.CPUTicks() > before.CPUTicks() {
			break
		}
	}
	if !after.RanSince(before) || after.CPUTicks() <= before.CPUTicks() {
		t.Errorf("busy thread did not run: before %+v after %+v", before, after)
	}
	if after.HasSched && after.Sched.RunNS <= before.Sched.RunNS {
		t.Errorf("schedstat run time did not grow: %d -> %d", before.Sched.RunNS, after.Sched.RunNS)
	}
	if after.State != 'R' {
		t.Logf("busy thread state %c (preempted at the moment of reading)", after.State)
	}
}

func TestThreadStates(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Kill()

	state := func() ThreadInfo {
		t.Helper()
		ti, err := ReadThreadInfo(pid, pid)
		if err != nil {
			t.Fatal(err)
		}
		return ti
	}
	waitState := func(want byte) ThreadInfo {
		t.Helper()
		var ti ThreadInfo
		for i := 0; i < 200; i++ {
			if ti = state(); ti.State == want {
				return ti
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("state %c, want %c", ti.State, want)
		return ti
	}
	s := waitState('S')
	if s.Name != "sleep" {
		t.Errorf("name %q", s.Name)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := waitState('T')
	time.Sleep(50 * time.Millisecond)
	if again := state(); again.RanSince(stopped) {
		t.Errorf("stopped thread ran: %+v -> %+v", stopped, again)
	}
	cmd.Process.Kill()
	waitState('Z') // killed, not yet reaped
	cmd.Wait()
	if _, err := ReadThreadInfo(pid, pid); err == nil {
		t.Error("reaped process still readable")
	}
}

func TestCmdline(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := Cmdline(os.Getpid()); !strings.HasPrefix(got, os.Args[0]) || !strings.Contains(exe, "procmaps") {
		t.Errorf("Cmdline(self) = %q, want it to start with %q", got, os.Args[0])
	}
	if got := Cmdline(-1); got != "" {
		t.Errorf("Cmdline(-1) = %q", got)
	}
}

// status-sleep.txt is /proc/PID/status of `setpriv --reuid 1000 --regid
// 1000 --clear-groups sleep 100`, as a 6.18 kernel printed it.
func TestParseStatusFile(t *testing.T) {
	b, err := os.ReadFile("testdata/status-sleep.txt")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Status{Tgid: 23909, TracerPID: 0, UIDs: [4]int{1000, 1000, 1000, 1000}, GIDs: [4]int{1000, 1000, 1000, 1000}, NSPID: 23909}
	if s != want {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
}

func TestReadStatusSelf(t *testing.T) {
	s, err := ReadStatus(os.Getpid(), unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	if s.Tgid != os.Getpid() || s.UIDs[0] != os.Getuid() || s.UIDs[1] != os.Geteuid() {
		t.Errorf("got %+v; pid %d uid %d euid %d", s, os.Getpid(), os.Getuid(), os.Geteuid())
	}
	if os.Geteuid() == 0 && s.CapEff == 0 {
		t.Errorf("root without effective capabilities: %+v", s)
	}
}

func TestParseStatusErrors(t *testing.T) {
	good := "Tgid:\t7\nTracerPid:\t0\nUid:\t1\t2\t3\t4\nSigPnd:\t0000000000000100\nCapEff:\t00000000a80425fb\n"
	s, err := ParseStatus([]byte(good))
	if want := (Status{Tgid: 7, UIDs: [4]int{1, 2, 3, 4}, GIDs: [4]int{-1, -1, -1, -1}, SigPnd: 0x100, CapEff: 0xa80425fb}); err != nil || s != want {
		t.Fatalf("got %+v, %v; want %+v", s, err, want)
	}
	tests := []struct {
		name, text, key string
		off             int
	}{
		{"empty", "", "Tgid", 0},
		{"no tracer", strings.Replace(good, "TracerPid", "Tracer", 1), "TracerPid", len(good) - 3},
		{"bad tgid", strings.Replace(good, "Tgid:\t7", "Tgid:\t-7", 1), "Tgid", 0},
		{"short uid", strings.Replace(good, "\t4\n", "\n", 1), "Uid", 21},
		{"bad sigpnd", strings.Replace(good, "0000000000000100", "g", 1), "SigPnd", 34},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStatus([]byte(tt.text))
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want *StatusError", err)
			}
			if se.Key != tt.key || se.Off != tt.off {
				t.Errorf("got %v, want key %s at offset %d", se, tt.key, tt.off)
			}
		})
	}
}

func TestReadStatFlagsKernelThread(t *testing.T) {
	const pfKthread = 0x00200000
	kthreadd, err := ReadStat(2, 0)
	if err != nil {
		t.Skipf("no kthreadd: %v", err)
	}
	self, err := ReadStat(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if kthreadd.Flags&pfKthread == 0 || self.Flags&pfKthread != 0 {
		t.Errorf("PF_KTHREAD: kthreadd flags %#x, self %#x", kthreadd.Flags, self.Flags)
	}
}

func FuzzParseStatus(f *testing.F) {
	fuzzbudget.Limit(f)
	if b, err := os.ReadFile("testdata/status-sleep.txt"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("Tgid:\t7\nUid:\t1\t2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseStatus(b); err != nil {
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *StatusError", err)
			}
			if se.Off < 0 || se.Off > len(b) {
				t.Fatalf("offset %d outside %d bytes", se.Off, len(b))
			}
		}
	})
}

// parseStatSplit is ParseStat splitting its fields with bytes.Split, as
// it did before: the reference the fuzz target checks the allocation-free
// split against (the decoding of the fields is shared).
func parseStatSplit(b []byte) (Stat, error) {
	b = bytes.TrimRight(b, "\n")
	s, rest, off, err := parseStatHead(b)
	if err != nil {
		return s, err
	}
	fields := bytes.Split(rest, []byte{' '})
	offs := make([]int, len(fields))
	for i, o := 0, off; i < len(fields); i++ {
		offs[i] = o
		o += len(fields[i]) + 1
	}
	return statFields(s, fields, offs, len(fields), len(b))
}
