package stackdump

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/gdbstack"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
)

// The tests in this file compare stacktop's dump with gdb on programs
// shaped like what runs on a stock distribution: threads blocked in libc,
// in the vDSO, in the PLT and in ld.so's lazy binding (libcblock), C++
// with inlined templates (cxxinline), Go (goprog), and the distribution's
// own stripped binaries without SFrame (python3, sleep, gzip). Every frame
// gdb prints must be in stacktop's dump at the same index with the same
// address, inlined frames included, and the names must agree wherever both
// have one.
//
// Known differences, checked rather than hidden:
//   - gdb adds tail-call frames it reconstructs from DWARF call-site
//     records (a function that jumped to the next one: glibc's
//     __futex_abstimed_wait_cancelable64 under pthread_cond_wait). They
//     are on no stack; stacktop rebuilds them the same way (method
//     "tailcall"), and dropTailCallFrames reports any it lacks.
//   - Go: gdb walks on past the real end of the system stacks
//     (runtime.clone and runtime.mcall have CFI that does not mark them
//     outermost); its frames are compared up to the first address outside
//     executable memory. stacktop ends a stack at the Go runtime's roots
//     (goexit, mstart, clone, mcall, rt0_go) and calls it complete.

// distroWant says what a comparison requires beyond gdb's frames.
type distroWant struct {
	// complete: every thread's walk reaches its outermost frame (Complete)
	// and ends in one of these functions.
	outermost []string
	// bottom: every thread's walk gets to one of these functions (where
	// the real stack ends), whether or not it knows to stop there.
	bottom []string
	// names of threads that must be present, each with a frame in the
	// listed function (to prove the target is in the shape the test is
	// about).
	threads map[string]string
}

func TestDistroLibcBlock(t *testing.T) {
	t.Parallel()
	needGDB(t)
	tg := targets.Start(t, "libcblock-sframe3")
	compareStopped(t, tg, distroWant{
		outermost: []string{"clone3", "_start"},
		threads: map[string]string{
			"pause":     "pause_wait",
			"nanosleep": "nanosleep_wait",
			"readpipe":  "read_wait",
			"condwait":  "cond_wait",
			"join":      "join_wait",
			"poll":      "poll_wait",
			"vdso":      "vdso_loop",
			"pltloop":   "plt_loop",
			"lazybind":  "_dl_fixup",
		},
	})
}

// TestDistroPLTStub catches the pltloop thread of libcblock with its pc in
// the PLT stub of rand_r (one jmp per call, a few percent of its time)
// and compares that stack with gdb's. The stub is covered by the
// linker's .sframe entry for .plt (and .eh_frame for .plt in builds
// without SFrame). Best effort: skipped if no stop lands in the stub.
func TestDistroPLTStub(t *testing.T) {
	t.Parallel()
	needGDB(t)
	tg := targets.Start(t, "libcblock-sframe3")
	threads, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	tid := 0
	for id, name := range threads {
		if name == "pltloop" {
			tid = id
		}
	}
	if tid == 0 {
		t.Fatal("no pltloop thread")
	}
	plt := pltRanges(t, tg.PID(), targets.Path("libcblock-sframe3"))
	tr := newTracer(t)
	// Stopped at random, the thread's pc is in a stub some 1 time in 400.
	// A stop costs about a millisecond and its pc is read from /proc; the
	// dump runs once, for the stop that landed in a stub.
	for try := 0; try < 5000; try++ {
		tg.Stop()
		if !plt.contains(stoppedPC(t, tg.PID(), tid)) {
			tg.Cont()
			continue
		}
		res, err := Run(tr, tg.PID(), Options{TID: tid})
		if err != nil {
			tg.Cont()
			t.Fatalf("dump: %v", err)
		}
		if len(res.Threads) != 1 || len(res.Threads[0].Frames) == 0 || !strings.HasSuffix(res.Threads[0].Frames[0].Function, "@plt") {
			tg.Cont()
			t.Fatalf("pc %#x is in a PLT stub, but the dump's first frame is not: %v", stoppedPC(t, tg.PID(), tid), res.Threads)
		}
		// The dump left the process stopped: gdb sees the same state.
		gdb, err := gdbstack.Backtrace(tg.PID())
		tg.Cont()
		if err != nil {
			t.Fatalf("gdb: %v", err)
		}
		t.Logf("pc in %s after %d tries; methods: %s", res.Threads[0].Frames[0].Function, try+1, methodShares(res.Threads))
		compareThread(t, res.Threads[0], gdb[tid], false)
		if t.Failed() {
			t.Logf("stacktop: %v\ngdb: %v", res.Threads[0].Frames, gdb[tid])
		}
		return
	}
	t.Skip("no stop landed in the PLT stub in 5000 tries")
}

// addrRanges are [start, end) address ranges.
type addrRanges [][2]uint64

func (rs addrRanges) contains(addr uint64) bool {
	for _, r := range rs {
		if r[0] <= addr && addr < r[1] {
			return true
		}
	}
	return false
}

// pltRanges returns where the PLT sections of the executable exe are in
// process pid.
func pltRanges(t *testing.T, pid int, exe string) addrRanges {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	var rs addrRanges
	for i := range maps {
		m := &maps[i]
		if !m.IsExec() || filepath.Base(m.Path) != filepath.Base(exe) {
			continue
		}
		bias, err := procmaps.LoadBias(f, m, uint64(os.Getpagesize()))
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range f.Sections {
			if sec.Name == ".plt" || sec.Name == ".plt.sec" {
				rs = append(rs, [2]uint64{bias + sec.Addr, bias + sec.Addr + sec.Size})
			}
		}
	}
	if len(rs) == 0 {
		t.Fatalf("no PLT of %s mapped in %d", exe, pid)
	}
	return rs
}

// stoppedPC reads the user pc of a thread stopped outside a system call
// from /proc/PID/task/TID/syscall ("-1 SP PC").
func stoppedPC(t *testing.T, pid, tid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return 0 // in a system call: a pc in the PLT never is
	}
	pc, err := strconv.ParseUint(strings.TrimPrefix(fields[len(fields)-1], "0x"), 16, 64)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return pc
}

func TestDistroCxxInline(t *testing.T) {
	t.Parallel()
	needGDB(t)
	tg := targets.Start(t, "cxxinline-sframe3")
	res := compareStopped(t, tg, distroWant{
		outermost: []string{"clone3", "_start"},
		threads:   map[string]string{"spin": "spin_inlined", "wait": "wait_thread"},
	})
	// The spinning thread's pc is in code inlined into spin_inlined: at
	// least the lambda and repeat_forever are inlined frames above it.
	for _, ts := range res.Threads {
		if ts.Name != "spin" {
			continue
		}
		inlined := 0
		for _, f := range ts.Frames {
			if strings.Contains(f.Function, "spin_inlined") && !f.Inlined {
				break
			}
			if f.Inlined {
				inlined++
			}
		}
		if inlined < 2 {
			t.Errorf("spin thread: %d inlined frames above spin_inlined, want at least 2: %v", inlined, ts.Frames)
		}
	}
}

func TestDistroGo(t *testing.T) {
	t.Parallel()
	needGDB(t)
	tg := targets.Start(t, "goprog")
	// sysmon preempts the spinning goroutine every 10 ms or so, and its
	// locked thread then waits in the scheduler (below runtime.mcall) for
	// a moment: stop the target while gospin is in its loop, the shape the
	// test is about. compareStopped then dumps it as stopped here.
	for attempt := 0; ; attempt++ {
		tg.Stop()
		res, err := Run(newTracer(t), tg.PID(), Options{Resolve: resolve.Options{Symbols: resolve.SymbolOptions{NoLines: true}}})
		if err == nil && threadRuns(res, "gospin", "main.spinLeaf") {
			break
		}
		tg.Cont()
		if attempt == 50 {
			t.Fatal("gospin never seen in main.spinLeaf")
		}
		time.Sleep(7 * time.Millisecond)
	}
	compareStopped(t, tg, distroWant{
		// Goroutine stacks end in runtime.goexit (whose address+1 Go
		// plants as the first return address); the system stacks of
		// threads started by the runtime in runtime.clone (below mstart),
		// and a stack switched by runtime.mcall (a system stack of the
		// main thread). Every one is complete: dump exits 0.
		outermost: []string{"runtime.goexit", "runtime.clone", "runtime.mcall", "runtime.mstart", "runtime.rt0_go"},
		threads:   map[string]string{"gospin": "main.spinLeaf"},
	})
}

// threadRuns reports whether res's thread named name has a frame in fn.
func threadRuns(res *Result, name, fn string) bool {
	for _, ts := range res.Threads {
		if ts.Name != name {
			continue
		}
		for _, f := range ts.Frames {
			if strings.Contains(f.Function, fn) {
				return true
			}
		}
	}
	return false
}

// TestDistroBinaries: the distribution's own stripped programs, without
// SFrame or frame pointers (their .eh_frame and libc's are what unwinds
// them), from the top of the stack to _start.
func TestDistroBinaries(t *testing.T) {
	t.Parallel()
	needGDB(t)
	script := filepath.Join(t.TempDir(), "nested.py")
	if err := os.WriteFile(script, []byte(`import time
def inner():
    time.sleep(100000)
def middle():
    inner()
def outer():
    middle()
print("ready", flush=True)
outer()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A thread blocked in threading.Lock().acquire(): PyThread_acquire_lock_timed
	// calls sem_wait through the PLT, and libc's sem_wait ends in a jump
	// (tail-call frames where the call sites are known).
	lock := filepath.Join(t.TempDir(), "lock.py")
	if err := os.WriteFile(lock, []byte(`import threading
l = threading.Lock()
l.acquire()
print("ready", flush=True)
l.acquire()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
		exe  string // basename of /proc/PID/exe once the program runs
	}{
		{"python3", []string{"python3", script}, "python3"},
		{"python3-lock", []string{"python3", lock}, "python3"},
		{"sleep", []string{"sleep", "100000"}, "sleep"},
		{"gzip", []string{"sh", "-c", "exec gzip -6 -c </dev/zero >/dev/null"}, "gzip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := exec.LookPath(c.exe); err != nil {
				t.Skipf("%s not installed", c.exe)
			}
			tg := targets.StartCommand(t, c.argv...)
			waitExe(t, tg, c.exe)
			if strings.HasPrefix(c.name, "python3") {
				select {
				case <-tg.Ready():
				case <-time.After(targets.ReadyTimeout):
					t.Fatalf("python3 not ready: %s", tg.Output())
				}
			}
			time.Sleep(200 * time.Millisecond) // into the sleep, into deflate
			compareStopped(t, tg, distroWant{outermost: []string{"_start"}})
		})
	}
}

func needGDB(t *testing.T) {
	t.Helper()
	needPtrace(t)
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb not installed")
	}
}

// waitExe waits until the process runs the program named exe (a shell may
// still be about to exec it).
func waitExe(t *testing.T, tg *targets.Target, exe string) {
	t.Helper()
	deadline := time.Now().Add(targets.ReadyTimeout)
	for {
		path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", tg.PID()))
		if err == nil && strings.HasPrefix(filepath.Base(path), exe) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d runs %q (%v), not %s; output: %s", tg.PID(), path, err, exe, tg.Output())
		}
		time.Sleep(time.Millisecond)
	}
}

// compareStopped stops tg, dumps it with stacktop and with gdb and compares
// every frame of every thread; want adds the checks of the case. It logs
// each process's share of frames per unwind method.
func compareStopped(t *testing.T, tg *targets.Target, want distroWant) *Result {
	t.Helper()
	tg.Stop()
	defer tg.Cont()
	res, gdb := dumpWithGDB(t, tg.PID(), Options{})
	maps, err := procmaps.ReadMaps(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Threads) != len(gdb) {
		t.Errorf("dumped %d threads, gdb saw %d", len(res.Threads), len(gdb))
	}
	seen := map[string]bool{}
	tailCalls := 0
	var names nameCounts
	for _, ts := range res.Threads {
		gdbFrames, ok := gdb[ts.TID]
		if !ok || len(gdbFrames) == 0 {
			t.Errorf("thread %d (%s) not in gdb's output", ts.TID, ts.Name)
			continue
		}
		wantFrames := gdbWalk(gdbFrames, maps)
		cut := len(wantFrames) < len(gdbFrames)
		var tail []gdbstack.Frame
		wantFrames, tail = dropTailCallFrames(t, tg.PID(), wantFrames, ts.Frames)
		for _, f := range tail {
			tailCalls++
			t.Errorf("thread %d (%s): gdb's frame #%d 0x%x %s follows no call instruction: a tail-call frame gdb built from DWARF call-site records, which stacktop lacks",
				ts.TID, ts.Name, f.Index, f.PC, f.Function)
		}
		names.add(compareThread(t, ts, wantFrames, cut))
		if fn, ok := want.threads[ts.Name]; ok {
			for _, f := range ts.Frames {
				if strings.Contains(f.Function, fn) {
					seen[ts.Name] = true
				}
			}
			if !seen[ts.Name] {
				t.Errorf("thread %s: no frame in %s", ts.Name, fn)
				seen[ts.Name] = true
			}
		}
		if want.outermost != nil {
			last := ""
			if n := len(ts.Frames); n > 0 {
				last = ts.Frames[n-1].Function
			}
			if last == "" && oneOf("_start", want.outermost) && len(ts.Frames) > 0 && inStart(t, tg.PID(), ts.Frames[len(ts.Frames)-1].PC) {
				last = "_start" // a stripped program: _start has no symbol
			}
			if !ts.Complete || !oneOf(strings.TrimSuffix(last, ".abi0"), want.outermost) {
				t.Errorf("thread %d (%s): complete=%v (%v), outermost frame %q, want one of %v",
					ts.TID, ts.Name, ts.Complete, ts.Err, last, want.outermost)
			}
		}
	}
	for _, ts := range res.Threads {
		if want.bottom == nil {
			break
		}
		found := false
		for _, f := range ts.Frames {
			found = found || oneOf(canonicalName(f.Function), want.bottom)
		}
		if !found {
			t.Errorf("thread %d (%s): no frame in any of %v", ts.TID, ts.Name, want.bottom)
		}
		if !ts.Complete {
			t.Logf("thread %d (%s): walk incomplete below %s: %v", ts.TID, ts.Name, ts.Frames[len(ts.Frames)-1].Function, ts.Err)
		}
	}
	for name := range want.threads {
		if !seen[name] {
			t.Errorf("no thread named %s", name)
		}
	}
	t.Logf("%s: %d threads, %d gdb tail-call frames missing, names (both/only stacktop/only gdb/neither) %d/%d/%d/%d, methods: %s",
		t.Name(), len(res.Threads), tailCalls, names.both, names.onlyStacktop, names.onlyGDB, names.neither, methodShares(res.Threads))
	return res
}

// gdbWalk returns gdb's frames up to where gdb's own walk went astray: gdb
// does not stop at the outermost frame of Go's system stacks (after
// runtime.mcall or runtime.clone it goes on with 0 or with stack
// addresses as return addresses), so its frames end at the first one whose
// address is in no executable mapping. Signal frames have no address and
// stay.
func gdbWalk(frames []gdbstack.Frame, maps []procmaps.Mapping) []gdbstack.Frame {
	for i, f := range frames {
		if f.Function == gdbstack.SignalFrame {
			continue
		}
		if !executable(f.PC, maps) {
			return frames[:i]
		}
	}
	return frames
}

func executable(pc uint64, maps []procmaps.Mapping) bool {
	for _, m := range maps {
		if pc >= m.Start && pc < m.End {
			return m.Perms&procmaps.PermExec != 0
		}
	}
	return false
}

// dropTailCallFrames splits gdb's frames into those on the machine stack and
// the tail-call frames gdb adds: where a function was entered by a jump
// (a tail call), gdb reconstructs the jumping function's frame from the
// DWARF call-site records (DW_TAG_call_site with DW_AT_call_tail_call) of
// its caller, with the address after the jump as its pc. No return address
// on the stack points there, so no stack unwinder sees that frame.
// Such a frame is recognised by its pc: a return address follows a call
// instruction, gdb's tail-call pc follows a jump. Frame 0 and the frame
// below a signal frame hold interrupted pcs, not return addresses, and a
// frame with the pc of the frame above is the function that frame was
// inlined into. Only a frame stacktop does not have at its place is left
// out, so a made-up return address both agree on stays.
func dropTailCallFrames(t *testing.T, pid int, frames []gdbstack.Frame, got []profile.Frame) (stack, tail []gdbstack.Frame) {
	t.Helper()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for i, f := range frames {
		if i == 0 || f.Function == gdbstack.SignalFrame || frames[i-1].Function == gdbstack.SignalFrame ||
			f.PC == frames[i-1].PC { // the function an inlined frame is in
			stack = append(stack, f)
			continue
		}
		// A frame stacktop has at this place stays: Go's goroutines
		// start with goexit+1 as a made-up return address.
		if n := len(stack); n < len(got) && got[n].PC == f.PC {
			stack = append(stack, f)
			continue
		}
		var b [7]byte
		if _, err := mem.ReadAt(b[:], int64(f.PC-7)); err != nil || callEndsAt(b) {
			stack = append(stack, f)
			continue
		}
		tail = append(tail, f)
	}
	return stack, tail
}

// callEndsAt reports whether the 7 bytes before an address end with an
// x86-64 call: call rel32 (e8) or call r/m64 (ff /2, 2 to 7 bytes with its
// ModRM, SIB and displacement; a REX prefix comes before the ff).
func callEndsAt(b [7]byte) bool {
	if b[2] == 0xe8 {
		return true
	}
	for n := 2; n <= 7; n++ {
		if b[7-n] == 0xff && (b[7-n+1]>>3)&7 == 2 {
			return true
		}
	}
	return false
}

// compareThread requires stacktop's frames to start with gdb's, address by
// address and, where both name a frame, name by name. Beyond gdb's last
// frame stacktop may go on only where gdb stopped early: at main (gdb's
// "backtrace past-main" is off; for Go, main.main) or where its walk
// went astray (cut).
func compareThread(t *testing.T, ts ThreadStack, want []gdbstack.Frame, cut bool) (names nameCounts) {
	t.Helper()
	for i := range want {
		if i >= len(ts.Frames) {
			t.Errorf("thread %d (%s): stacktop stopped after %d frames (%v), gdb #%d is 0x%x %s",
				ts.TID, ts.Name, len(ts.Frames), ts.Err, i, want[i].PC, want[i].Function)
			return names
		}
		got := ts.Frames[i]
		if want[i].Function == gdbstack.SignalFrame {
			continue
		}
		if got.PC != want[i].PC {
			t.Errorf("thread %d (%s) frame #%d: stacktop 0x%x %s (%s), gdb 0x%x %s; gdb's stack: %v",
				ts.TID, ts.Name, i, got.PC, got.Function, got.Method, want[i].PC, want[i].Function, want)
			return names
		}
		switch {
		case got.Function != "" && want[i].Function != "??":
			names.both++
			if !sameFunction(got.Function, want[i].Function) {
				t.Errorf("thread %d (%s) frame #%d 0x%x: stacktop names it %q, gdb %q",
					ts.TID, ts.Name, i, got.PC, got.Function, want[i].Function)
			}
		case got.Function != "":
			names.onlyStacktop++
		case want[i].Function != "??":
			names.onlyGDB++
			t.Logf("thread %d (%s) frame #%d 0x%x: only gdb names it: %s", ts.TID, ts.Name, i, got.PC, want[i].Function)
		default:
			names.neither++
		}
	}
	if len(ts.Frames) > len(want) && !cut && len(want) > 0 && !oneOf(want[len(want)-1].Function, []string{"main", "main.main"}) {
		extra := ts.Frames[len(want)]
		t.Errorf("thread %d (%s): stacktop has %d frames, gdb %d; extra #%d 0x%x %s",
			ts.TID, ts.Name, len(ts.Frames), len(want), len(want), extra.PC, extra.Function)
	}
	return names
}

// nameCounts counts the compared frames by who could name them.
type nameCounts struct{ both, onlyStacktop, onlyGDB, neither int }

func (n *nameCounts) add(m nameCounts) {
	n.both += m.both
	n.onlyStacktop += m.onlyStacktop
	n.onlyGDB += m.onlyGDB
	n.neither += m.neither
}

// sameFunction compares a function name from stacktop with gdb's. The two
// read names from different places for the same address: gdb prefers the
// DWARF name or glibc's internal alias (__GI___libc_read, ___pthread_cond_wait),
// stacktop the symbol table's preferred global name (read,
// pthread_cond_wait@@GLIBC_2.3.2) and demangled C++ with its parameter list.
// So names are compared without symbol versions, glibc's __GI_ prefix,
// leading underscores, "__libc_", libio's "_IO_new_" (_IO_new_file_write
// is _IO_file_write@@GLIBC_2.2.5), "_impl" (__libc_start_main_impl), the
// vDSO's "__vdso_" and parameter lists.
//
// stacktop names inlined C++ frames by their DW_AT_name, without the
// enclosing namespaces and classes gdb prints, so a name also matches a
// qualified one it ends ("step" matches "(anonymous namespace)::Mixer<unsigned
// long>::step"); a demangled template function's return type ("void
// std::this_thread::sleep_for<...>(...)") and GCC's clone suffixes
// (" [clone .constprop.0]") are dropped, and so is Go's ".abi0" (the ELF
// name of an assembly function; gdb prints its DWARF name).
func sameFunction(got, want string) bool {
	g, w := canonicalName(got), canonicalName(want)
	return g == w || strings.HasSuffix(w, "::"+g) || strings.HasSuffix(g, "::"+w)
}

// glibcAliases are versioned glibc functions whose public symbol gdb
// names by the implementation's DWARF name: the same address.
var glibcAliases = map[string]string{
	"__new_sem_wait": "sem_wait",
}

// lfsAliases are the glibc functions whose NAME64 is NAME on 64-bit.
var lfsAliases = map[string]bool{
	"open": true, "openat": true, "creat": true, "lseek": true, "pread": true, "pwrite": true,
	"preadv": true, "pwritev": true, "fopen": true, "fstat": true, "stat": true, "lstat": true,
	"fstatat": true, "ftruncate": true, "truncate": true, "mmap": true, "sendfile": true,
}

func canonicalName(s string) string {
	if i := strings.IndexByte(s, '@'); i > 0 {
		s = s[:i]
	}
	if i := strings.Index(s, " [clone "); i > 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, ".abi0")
	// A compiler's clone (do_futex_wait.constprop.0) has an ELF symbol
	// of its own; gdb names it by its DWARF origin (do_futex_wait).
	for _, clone := range []string{".constprop.", ".isra.", ".part."} {
		if i := strings.Index(s, clone); i > 0 {
			s = s[:i]
		}
	}
	s = strings.TrimSuffix(s, "_impl") // __libc_start_main_impl is __libc_start_main@@GLIBC_2.34
	if alias, ok := glibcAliases[s]; ok {
		s = alias
	}
	s = strings.TrimPrefix(s, "__GI_")
	s = strings.TrimPrefix(s, "__vdso_") // the vDSO exports both names
	s = strings.TrimLeft(s, "_")
	s = strings.TrimPrefix(s, "libc_")
	if rest, ok := strings.CutPrefix(s, "IO_new_"); ok { // libio's versioned aliases
		s = "IO_" + rest
	}
	// On 64-bit glibc the large-file functions are the plain ones: one
	// address, two names (gdb takes __libc_open64, the ELF symbol open).
	if base, ok := strings.CutSuffix(s, "64"); ok && lfsAliases[base] {
		s = base
	}
	s = strings.TrimSuffix(s, " const")
	// Drop a trailing parameter list "(...)" unless it is the name of
	// operator().
	if strings.HasSuffix(s, ")") && !strings.HasSuffix(s, "operator()") {
		depth := 0
		for i := len(s) - 1; i >= 0; i-- {
			switch s[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				if i > 0 {
					s = s[:i]
				}
				break
			}
		}
	}
	// Drop a return type: the text up to the last space outside <> and ().
	depth := 0
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '>', ')':
			depth++
		case '<', '(':
			depth--
		case ' ':
			if depth == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// inStart reports whether pc is a return address into the program's entry
// point (_start calls __libc_start_main within its first 0x40 bytes).
func inStart(t *testing.T, pid int, pc uint64) bool {
	t.Helper()
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bias uint64
	if f.Type == elf.ET_DYN {
		path, err := os.Readlink(exe)
		if err != nil {
			t.Fatal(err)
		}
		maps, err := procmaps.ReadMaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range maps {
			if m.Path == path && m.Offset == 0 {
				bias = m.Start // the first PT_LOAD of a PIE is at vaddr 0
				break
			}
		}
	}
	start := bias + f.Entry
	return pc > start && pc-start < 0x40
}

func oneOf(s string, list []string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}
