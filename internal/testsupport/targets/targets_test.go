package targets

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

var names = []string{"chains", "manythreads", "exiter"}

// TestBinariesSFrame checks every committed binary's .sframe section: the
// version byte in its preamble matches the variant, and the FP variant has
// none. It reads the files with debug/elf only, so it needs no binutils.
func TestBinariesSFrame(t *testing.T) {
	for _, name := range names {
		for _, v := range Variants {
			file := name + "-" + v
			t.Run(file, func(t *testing.T) {
				f, err := elf.Open(Path(file))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_DYN {
					t.Errorf("machine %v type %v, want x86-64 PIE", f.Machine, f.Type)
				}
				if f.Section(".symtab") == nil {
					t.Error("no .symtab: symbolization tests need one")
				}
				want := SFrameVersion(v)
				sec := f.Section(".sframe")
				if want == 0 {
					if sec != nil {
						t.Fatalf("has .sframe, want none")
					}
					return
				}
				if sec == nil {
					t.Fatalf("no .sframe, want version %d", want)
				}
				b, err := sec.Data()
				if err != nil {
					t.Fatal(err)
				}
				if len(b) < 28 {
					t.Fatalf(".sframe is %d bytes, shorter than its header", len(b))
				}
				if magic := binary.LittleEndian.Uint16(b); magic != 0xdee2 {
					t.Errorf(".sframe magic %#x, want 0xdee2", magic)
				}
				if got := int(b[2]); got != want {
					t.Errorf(".sframe version %d, want %d", got, want)
				}
				if !hasPTGNUSFrame(f) {
					t.Errorf("no PT_GNU_SFRAME program header")
				}
			})
		}
	}
}

func hasPTGNUSFrame(f *elf.File) bool {
	const ptGNUSFrame = 0x6474e554
	for _, p := range f.Progs {
		if p.Type == ptGNUSFrame {
			return true
		}
	}
	return false
}

func TestPathFromSubdirectory(t *testing.T) {
	p := Path("chains-fp")
	if !strings.HasSuffix(p, "/testdata/targets/bin/chains-fp") {
		t.Errorf("Path = %q", p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Error(err)
	}
}

// waitProgress polls until the target's counter exceeds after. A running
// target bumps it every 10 ms; the deadline only bounds a hung test.
func waitProgress(t *testing.T, tg *Target, after int64) int64 {
	t.Helper()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		n, err := tg.Progress()
		if err != nil {
			t.Fatal(err)
		}
		if n > after {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress stuck at %d (output: %s)", n, tg.Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestChainsStopCont(t *testing.T) {
	tg := Start(t, "chains-sframe2")
	p0, err := tg.Progress()
	if err != nil {
		t.Fatal(err)
	}
	p1 := waitProgress(t, tg, p0)

	tg.Stop()
	states, err := ThreadStates(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	for tid, s := range states {
		if s != 'T' {
			t.Errorf("thread %d state %c after Stop, want T", tid, s)
		}
	}
	stopped, err := tg.Progress()
	if err != nil {
		t.Fatal(err)
	}
	if stopped < p1 {
		t.Errorf("progress went back from %d to %d", p1, stopped)
	}
	time.Sleep(50 * time.Millisecond) // five periods: a running target would move
	if again, _ := tg.Progress(); again != stopped {
		t.Errorf("progress moved from %d to %d while stopped", stopped, again)
	}

	tg.Cont()
	waitProgress(t, tg, stopped)
}

func TestChainsThreadNames(t *testing.T) {
	tg := Start(t, "chains-fp")
	threads, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(threads), len(ChainsStacks)+1; got != want {
		t.Errorf("%d threads, want %d: %v", got, want, threads)
	}
	if threads[tg.PID()] != "chains-fp" {
		t.Errorf("main thread comm %q", threads[tg.PID()])
	}
	have := map[string]bool{}
	for _, comm := range threads {
		have[comm] = true
	}
	for comm := range ChainsStacks {
		if !have[comm] {
			t.Errorf("no thread named %q", comm)
		}
	}
}

func TestManythreads(t *testing.T) {
	tg := Start(t, "manythreads-sframe3")
	threads, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, comm := range threads {
		count[comm]++
	}
	if len(threads) != 1001 || count["mt-spin"] != 4 || count["mt-cond"] != 498 || count["mt-sleep"] != 498 {
		t.Errorf("%d threads, by name %v; want 1001: 4 mt-spin, 498 mt-cond, 498 mt-sleep", len(threads), count)
	}
	tg.Stop()
	tg.Cont()
}

func TestExiterExits(t *testing.T) {
	tg := Start(t, "exiter-sframe3", "exit", "100")
	select {
	case <-tg.Done():
	case <-time.After(ReadyTimeout):
		t.Fatal("exiter did not exit")
	}
}

func TestExiterChurn(t *testing.T) {
	tg := Start(t, "exiter-fp", "churn")
	p, err := tg.Progress()
	if err != nil {
		t.Fatal(err)
	}
	waitProgress(t, tg, p+100)
	tg.Stop()
	tg.Cont()
}

func TestStartFailsOnEarlyExit(t *testing.T) {
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(ft, "exiter-fp") // no mode: prints usage and exits 2
	}()
	<-done
	if !strings.Contains(ft.msg, "exited before it was ready") || !strings.Contains(ft.msg, "usage") {
		t.Errorf("failure message %q", ft.msg)
	}
}

// fakeTB records the first Fatalf and ends the goroutine, as testing does.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	if f.msg == "" {
		f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	}
	runtime.Goexit()
}

// TestWaitSyscall: chains' sysread thread blocks in read(2); no thread of
// that name is in write(2), and no thread has a name that is not there.
func TestWaitSyscall(t *testing.T) {
	nr, ok := map[string][2]int{"amd64": {0, 1}, "arm64": {63, 64}}[runtime.GOARCH]
	if !ok {
		t.Skipf("no system call numbers for %s", runtime.GOARCH)
	}
	read, write := nr[0], nr[1]
	tg := Start(t, "chains-sframe3")
	if err := WaitSyscall(tg.PID(), "sysread", read, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := WaitSyscall(tg.PID(), "sysread", write, 100*time.Millisecond); err == nil {
		t.Error("sysread reported in write(2)")
	}
	if err := WaitSyscall(tg.PID(), "no-such-thread", read, 100*time.Millisecond); err == nil {
		t.Error("a thread that does not exist reported in read(2)")
	}
}
