//go:build linux

// Command capture is the live end-to-end test run inside the emulated
// s390x and arm64 machines (emu/run.sh), and the tool that captures the
// snapshots under testdata/cross.
//
// As the initramfs's /init (PID 1) it mounts /proc, /sys, /dev and /tmp,
// runs "capture test" on every /spin-* fixture in a child process, then
// runs /stacktop dump and record against a fixture when /stacktop exists,
// prints "EMU-RESULT: PASS" or "EMU-RESULT: FAIL" and powers the machine
// off (QEMU's exit status cannot say whether a test passed).
//
// "capture test [-snapshots] FIXTURE..." starts each fixture (through
// "capture spawn", so it is not this process's child: a tracer's wait
// must not race os/exec; internal/testsupport/targets does the same with a shell,
// which the initramfs does not have), attaches with package ptrace, freezes it,
// samples every thread, and unwinds each sample with package unwind
// (SFrame, then frame pointers on arm64 or the back chain on s390x). The
// spinning threads' stacks are known by construction (testdata/cross/
// spin.c); each must start with its known chain, every caller found by the
// method the fixture's build calls for. With -snapshots the deep, leaf and big
// threads are printed as unwind.Snapshot JSON (gzip, base64, between
// markers) with a symbol sidecar, for emu/run.sh to store. Thread names
// come from procmaps, and the wait for goprog's thread to block in a
// system call is internal/testsupport/targets' WaitSyscall, as in the live tests.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/backchain"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

func main() {
	if os.Getpid() == 1 {
		os.Exit(initMain())
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: capture test [-snapshots] FIXTURE... | capture spawn PROG")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "spawn":
		os.Exit(spawnMain(os.Args[2:]))
	case "test":
		os.Exit(testMain(os.Args[2:]))
	}
	fmt.Fprintln(os.Stderr, "capture: unknown mode", os.Args[1])
	os.Exit(2)
}

// initMain is PID 1 of the emulated machine.
func initMain() int {
	for _, m := range [][3]string{{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}, {"tmpfs", "/tmp", "tmpfs"}} {
		os.MkdirAll(m[1], 0o755)
		if err := unix.Mount(m[0], m[1], m[2], 0, ""); err != nil {
			fmt.Println("capture: mount", m[1], err)
		}
	}
	var st unix.Stat_t
	if unix.Fstat(1, &st) != nil {
		// Without /dev/console in the initramfs init starts without fds.
		if fd, err := unix.Open("/dev/console", unix.O_RDWR, 0); err == nil {
			for i := 0; i < 3; i++ {
				unix.Dup2(fd, i)
			}
		}
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	fmt.Printf("capture: kernel %s %s, uptime %ss\n", unix.ByteSliceToString(uts.Release[:]),
		unix.ByteSliceToString(uts.Machine[:]), uptime())
	fixtures, _ := filepath.Glob("/spin-*")
	args := []string{"test"}
	if cmdlineHas("capture.snapshots") {
		args = append(args, "-snapshots")
	}
	fail := run(os.Args[0], append(args, fixtures...)...) != nil
	if _, err := os.Stat("/stacktop"); err == nil && len(fixtures) > 0 {
		if err := stacktopChecks(fixtures); err != nil {
			fmt.Println("capture: stacktop:", err)
			fail = true
		}
	}
	if _, err := os.Stat("/goprog"); err == nil && runtime.GOARCH == "arm64" {
		if err := goSystemstackCheck(); err != nil {
			fmt.Println("capture: goprog:", err)
			fail = true
		}
		if err := goMcallCheck(); err != nil {
			fmt.Println("capture: goprog mcall:", err)
			fail = true
		}
	}
	fmt.Printf("capture: done at uptime %ss\n", uptime())
	if fail {
		fmt.Println("EMU-RESULT: FAIL")
	} else {
		fmt.Println("EMU-RESULT: PASS")
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "TMPDIR=/tmp", "HOME=/tmp")
	return cmd.Run()
}

// stacktopChecks runs the real CLI against every fixture: a dump,
// then a short record printed as folded stacks. Both must show every
// spinning thread's known chain (the record as consecutive frames of one
// stack), the big thread's included: its caller is beyond the copied
// window, and on s390x its frame 0 saved registers in FPRs. A dump that says some stack is truncated (exit
// status 1) passes: the main thread waits in libc, which has no .sframe.
func stacktopChecks(fixtures []string) error {
	for _, f := range fixtures {
		if err := stacktopCheck(f); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

func stacktopCheck(fixture string) error {
	pid, err := spawn(fixture)
	if err != nil {
		return err
	}
	defer unix.Kill(pid, unix.SIGKILL)
	p := strconv.Itoa(pid)
	// Once with the default unwinders (the static binaries have .eh_frame,
	// so CFI answers first), once with only the fixture's own method
	// (--unwinder), which is what the build is about.
	only := callerMethod(fixture).String()
	for _, args := range [][]string{
		{"dump", "-p", p},
		{"record", "-p", p, "--duration", "2s", "--rate", "20", "--format", "folded", "-o", "-", "-q"},
		{"dump", "-p", p, "--unwinder", only},
		{"record", "-p", p, "--duration", "2s", "--rate", "20", "--format", "folded", "-o", "-", "-q", "--unwinder", only},
	} {
		fmt.Printf("=== stacktop %s (%s)\n", strings.Join(args, " "), filepath.Base(fixture))
		cmd := exec.Command("/stacktop", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		err := cmd.Run()
		os.Stdout.Write(out.Bytes())
		var ee *exec.ExitError
		if err != nil && !(args[0] == "dump" && errors.As(err, &ee) && ee.ExitCode() == 1) {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		for _, e := range spinThreads {
			for _, name := range e.chain {
				if !bytes.Contains(out.Bytes(), []byte(name)) {
					return fmt.Errorf("%s: output lacks %s (thread %s)", args[0], name, e.comm)
				}
			}
			if args[0] != "record" {
				continue
			}
			folded := slices.Clone(e.chain)
			slices.Reverse(folded)
			if !bytes.Contains(out.Bytes(), []byte(strings.Join(folded, ";"))) {
				return fmt.Errorf("record: no stack with %s (thread %s)", strings.Join(folded, ";"), e.comm)
			}
		}
	}
	return nil
}

// goSystemstackCheck: goprog's thread gosys blocks in a write from Go's
// system stack, inside runtime.systemstack (see its doc). stacktop dump
// must go on past systemstack to the goroutine's frames (method gostack),
// as Go's own traceback does, down to runtime.goexit.
func goSystemstackCheck() error {
	const writeNR = 64 // arm64
	return goStackCheck(goStackDump{
		args: []string{"systemstack"}, thread: "gosys", syscall: writeNR,
		from: "runtime.systemstack", then: []string{"[gostack]", "main.dumpHeap", "main.main.func", "runtime.goexit"},
	})
}

// goMcallCheck: goprog's thread goblock waits in the scheduler (futex)
// for its locked goroutine, parked by mcall(park_m) in a channel receive.
// stacktop dump must go on past runtime.mcall to the goroutine's frames
// (method gostack, from m.lockedg.sched), down to runtime.goexit.
func goMcallCheck() error {
	const futexNR = 98 // arm64
	return goStackCheck(goStackDump{
		thread: "goblock", syscall: futexNR,
		// No lines: under emulation the Go runtime's DWARF lines take minutes.
		dumpArgs: []string{"--no-lines"},
		from:     "runtime.mcall", then: []string{"runtime.gopark", "[gostack]", "runtime.chanrecv", "main.blockHere", "main.main.func", "runtime.goexit"},
	})
}

// goStackDump is one check of a Go stack switch: run goprog with args,
// wait until its thread is blocked in system call syscall, dump that
// thread, and find from's frame followed, in order, by then's.
type goStackDump struct {
	args     []string
	thread   string
	syscall  int
	dumpArgs []string
	from     string
	then     []string
}

func goStackCheck(c goStackDump) error {
	cmd := exec.Command("/goprog", c.args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); !strings.HasPrefix(line, "ready") {
		return fmt.Errorf("no ready line (%q, %v)", line, err)
	}
	pid := cmd.Process.Pid
	if err := targets.WaitSyscall(pid, c.thread, c.syscall, 20*time.Second); err != nil {
		return err
	}
	args := append([]string{"dump", "-p", strconv.Itoa(pid), "--thread-name", c.thread}, c.dumpArgs...)
	fmt.Printf("=== stacktop %s (%s)\n", strings.Join(args, " "), strings.Join(append([]string{"goprog"}, c.args...), " "))
	b, err := exec.Command("/stacktop", args...).CombinedOutput()
	os.Stdout.Write(b)
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	text := string(b)
	i := strings.Index(text, c.from)
	if i < 0 {
		return fmt.Errorf("no %s frame", c.from)
	}
	rest := text[i:]
	for _, name := range c.then {
		j := strings.Index(rest, name)
		if j < 0 {
			return fmt.Errorf("no %s after %s", name, c.from)
		}
		rest = rest[j:]
	}
	return nil
}

func cmdlineHas(word string) bool {
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		if f == word {
			return true
		}
	}
	return false
}

func uptime() string {
	b, _ := os.ReadFile("/proc/uptime")
	return strings.Fields(string(b) + " ?")[0]
}

// spawnMain starts PROG, waits for its "ready" line, prints PROG's PID
// and exits, leaving PROG to be adopted by init.
func spawnMain(args []string) int {
	if len(args) != 1 {
		return 2
	}
	cmd := exec.Command(args[0])
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ready") {
		fmt.Fprintf(os.Stderr, "%s: no ready line (%q, %v)\n", args[0], line, err)
		cmd.Process.Kill()
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	return 0
}

// spawn starts fixture through "capture spawn" and returns its PID.
func spawn(fixture string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "spawn", fixture)
	cmd.Stderr = os.Stderr // not a pipe: the fixture inherits it and lives on
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("spawn %s: %w", fixture, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// expectation is the known chain of one thread of spin.c, innermost
// first, and how the fixture's build must find the callers.
type expectation struct {
	comm  string
	chain []string
	// leaf: chain[0] calls nothing. Built with frame pointers only
	// (arm64-fp omits leaf frame records), it saves nothing: its caller
	// must come from the link register (lr), the rest by frame records.
	leaf bool
}

var spinThreads = []expectation{
	{"deep", []string{"spin_nonleaf", "level1", "level2", "level3", "deep_thread"}, false},
	{"leaf", []string{"spin_leaf", "leaf_caller", "leaf_thread"}, true},
	// A leaf with 40 KiB of locals: its caller is beyond a 16 KiB window,
	// inside the copy of the used stack.
	{"big", []string{"spin_bigleaf", "big_caller", "big_thread"}, true},
}

// callerMethod is the method every caller in the known chain must come
// from, by the fixture's name (see testdata/cross/build.sh).
func callerMethod(fixture string) unwind.Method {
	switch {
	case strings.HasSuffix(fixture, "-sframe"):
		return unwind.MethodSFrame
	case strings.HasSuffix(fixture, "-backchain"):
		return unwind.MethodBackChain
	}
	return unwind.MethodFP
}

func testMain(args []string) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	snapshots := fs.Bool("snapshots", false, "print snapshots of the deep, leaf and big threads")
	rounds := fs.Int("rounds", 5, "freeze-and-sample rounds per fixture")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tr := ptrace.NewTracer()
	defer tr.Close()
	failed := 0
	for _, fx := range fs.Args() {
		start := time.Now()
		err := testFixture(tr, fx, *rounds, *snapshots)
		status := "PASS"
		if err != nil {
			status = "FAIL: " + err.Error()
			failed++
		}
		fmt.Printf("--- %s %s (%.1fs)\n", status, filepath.Base(fx), time.Since(start).Seconds())
	}
	fmt.Printf("capture: %d passed, %d failed\n", len(fs.Args())-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// target is what the unwinder needs of a fixture: its modules and
// symbols (static executables: the ELF and the vDSO).
type target struct {
	name string
	mods unwind.ModuleList
	snap []unwind.SnapshotModule
	syms []elf.Symbol
	maps []procmaps.Mapping
}

func loadTarget(pid int, path string) (*target, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return nil, fmt.Errorf("%s: not a static non-PIE executable", path)
	}
	t := &target{name: filepath.Base(path)}
	t.syms, _ = f.Symbols()
	var sm unwind.SnapshotModule
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			sm = unwind.SnapshotModule{Start: p.Vaddr, End: p.Vaddr + p.Memsz, Path: t.name}
		}
	}
	if sec := f.Section(".sframe"); sec != nil {
		if sm.SFrame, err = sec.Data(); err != nil {
			return nil, fmt.Errorf("%s: .sframe: %w", path, err)
		}
		sm.SFrameVaddr = sec.Addr
	}
	t.snap = append(t.snap, sm)
	if t.maps, err = procmaps.ReadMaps(pid); err != nil {
		return nil, err
	}
	for _, m := range t.maps {
		if m.Kind == procmaps.KindVDSO {
			t.snap = append(t.snap, unwind.SnapshotModule{Start: m.Start, End: m.End, Path: "[vdso]", IsVDSO: true})
		}
	}
	s := unwind.Snapshot{Modules: t.snap, Regs: regs.Set{Arch: regs.ARM64}}
	if t.mods, err = s.ModuleList(); err != nil {
		return nil, err
	}
	return t, nil
}

// stackOf is the mapping that holds sp.
func (t *target) stackOf(sp uint64) unwind.StackBounds {
	for _, m := range t.maps {
		if m.Contains(sp) {
			return unwind.StackBounds{Low: m.Start, High: m.End}
		}
	}
	return unwind.StackBounds{}
}

func (t *target) symbolize(pc uint64) (elf.Symbol, bool) {
	for _, s := range t.syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && pc >= s.Value && pc < s.Value+s.Size {
			return s, true
		}
	}
	return elf.Symbol{}, false
}

// describe names frame i's PC as stacktop dump does (profile.Frame.Label);
// a caller's is looked up at PC-1, its call.
func (t *target) describe(pc uint64, i int) string {
	look := pc
	if i > 0 {
		look--
	}
	f := profile.Frame{PC: pc}
	if s, ok := t.symbolize(look); ok {
		f.Function, f.Offset = s.Name, pc-s.Value
	} else if m, ok := t.mods.ModuleAt(pc); ok {
		f.Module, f.Offset = m.Path, pc-m.Start
	}
	return f.Label()
}

// Options is the walk both the live test and the snapshot replay use:
// SFrame first, then frame pointers (amd64, arm64) or the back chain.
func Options(arch regs.Arch, mods unwind.ModuleList, stack unwind.StackBounds, pac uint64) unwind.Options {
	o := unwind.Options{Stack: stack, PACMask: pac}
	if arch == regs.S390X {
		o.Fallback = backchain.Unwinder{
			InVDSO: func(pc uint64) bool { m, ok := mods.ModuleAt(pc); return ok && m.IsVDSO },
			IsCode: func(pc uint64) bool { _, ok := mods.ModuleAt(pc); return ok },
		}
	}
	return o
}

func testFixture(tr *ptrace.Tracer, fixture string, rounds int, snapshots bool) error {
	pid, err := spawn(fixture)
	if err != nil {
		return err
	}
	defer unix.Kill(pid, unix.SIGKILL)
	t, err := loadTarget(pid, fixture)
	if err != nil {
		return err
	}
	proc, err := tr.Attach(pid)
	if err != nil {
		return err
	}
	defer proc.Detach()
	// Once, before any freeze: PACMask stops and resumes a thread itself.
	pac, err := proc.PACMask()
	if err != nil {
		return err
	}
	want := callerMethod(t.name)
	live := ptrace.NewMemory(pid)
	defer live.Close()
	var firstErr error
	for round := 0; round < rounds; round++ {
		last := round == rounds-1
		if last {
			fmt.Printf("=== dump of %s (pid %d), round %d\n", t.name, pid, round)
		}
		if err := checkRound(proc, t, live, pac, want, last, snapshots && last); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("round %d: %w", round, err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	return firstErr
}

// comm is thread tid's name, "" when it cannot be read.
func comm(pid, tid int) string {
	st, _ := procmaps.ReadStat(pid, tid)
	return st.Comm
}

func checkRound(proc *ptrace.Process, t *target, live unwind.Memory, pac uint64, want unwind.Method, print, snapshots bool) error {
	if err := proc.Freeze(); err != nil {
		return err
	}
	type taken struct {
		s    ptrace.Sample
		fprs int
	}
	var samples []taken
	for _, tid := range proc.Threads() {
		s, err := proc.Sample(tid, 16<<10, 0)
		if err != nil {
			proc.Thaw()
			return fmt.Errorf("thread %d: %w", tid, err)
		}
		// As a dump copies it: the thread's used stack, from SP to the top
		// of its mapping (frozen, the thread is read again, not stopped),
		// so a frame larger than the 16 KiB window is in the copy.
		if top := t.stackOf(s.StackAddr).High; top > s.StackAddr+uint64(len(s.Stack)) {
			if s, err = proc.Sample(tid, min(int(top-s.StackAddr), 1<<20), top); err != nil {
				proc.Thaw()
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
		if err := proc.FPRegs(tid, &s.Regs); err != nil {
			proc.Thaw()
			return fmt.Errorf("thread %d: %w", tid, err)
		}
		samples = append(samples, taken{s, popcount(s.Regs.Valid >> 16)})
	}
	if err := proc.Thaw(); err != nil {
		return err
	}
	if print {
		fmt.Printf("pac mask %#x\n", pac)
	}
	var errs []error
	for _, tk := range samples {
		s := tk.s
		c := comm(proc.PID(), s.TID)
		stack := t.stackOf(s.StackAddr)
		opts := Options(s.Regs.Arch, t.mods, stack, pac)
		// The link-register rule for a leaf without tables needs the
		// functions' bounds (static, non-PIE: symbol values are addresses).
		opts.FuncAt = func(pc uint64) (uint64, uint64, bool) {
			sym, ok := t.symbolize(pc)
			return sym.Value, sym.Value + sym.Size, ok
		}
		// Beyond the copy the walk would read the live stack, as the
		// sampler does; the copy holds the thread's stack, so it must not
		// (StackEnd records such reads).
		win := &unwind.StackWindow{Base: s.StackAddr, Bytes: s.Stack, Fallback: live, StackEnd: stack.High}
		st := unwind.Walk(s.Regs, win, t.mods, opts)
		if print {
			fprs := ""
			if s.Regs.Arch == regs.S390X {
				fprs = fmt.Sprintf(", %d FPRs read as DWARF 16-31", tk.fprs)
			}
			fmt.Printf("thread %d %q (%s%s) complete=%v err=%v\n", s.TID, c, s.Regs.Arch, fprs, st.Complete, st.Err)
			for i, f := range st.Frames {
				fmt.Printf("  #%-2d %#016x %-9s %s\n", i, f.PC, f.Method, t.describe(f.PC, i))
			}
		}
		for _, e := range spinThreads {
			if e.comm != c {
				continue
			}
			if err := checkChain(t, st, e, want); err != nil {
				errs = append(errs, fmt.Errorf("thread %s: %w", c, err))
				continue
			}
			if win.Missed > 0 {
				errs = append(errs, fmt.Errorf("thread %s: %d reads of its stack beyond the %d bytes copied", c, win.Missed, len(s.Stack)))
				continue
			}
			// A caller taken from the link register was checked against
			// the code before it, which a snapshot does not hold: such a
			// walk would not replay.
			if snapshots && !slices.ContainsFunc(st.Frames, func(f unwind.Frame) bool { return f.Method == unwind.MethodLinkReg }) {
				if err := emitSnapshot(t, s, st, stack, pac, c); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func popcount(v uint64) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

// checkChain: the stack starts with the known chain, and every caller in
// it was found by the fixture's method.
func checkChain(t *target, st unwind.Stack, e expectation, want unwind.Method) error {
	chain := e.chain
	if len(st.Frames) < len(chain) {
		return fmt.Errorf("%d frames, want at least %d (%v): %v", len(st.Frames), len(chain), chain, st.Err)
	}
	for i, name := range chain {
		f := st.Frames[i]
		pc := f.PC
		if i > 0 {
			pc-- // a return address: the call is before it
		}
		s, ok := t.symbolize(pc)
		if !ok || s.Name != name {
			return fmt.Errorf("frame %d is %s, want %s", i, t.describe(f.PC, i), name)
		}
		w := want
		if i == 1 && e.leaf && want == unwind.MethodFP {
			w = unwind.MethodLinkReg
		}
		if i > 0 && f.Method != w {
			return fmt.Errorf("frame %d (%s) found by %v, want %v", i, name, f.Method, w)
		}
	}
	return nil
}

// FrameSymbol names an expected frame in a snapshot's sidecar, so the
// replay test can check names without the binary.
type FrameSymbol struct {
	PC    uint64 `json:"pc"`
	Name  string `json:"name"`
	Start uint64 `json:"start"`
	Size  uint64 `json:"size"`
}

// Sidecar is testdata/cross/NAME.symbols.json.
type Sidecar struct {
	Fixture string        `json:"fixture"`
	Thread  string        `json:"thread"`
	Chain   []string      `json:"chain"`
	Method  string        `json:"method"`
	Frames  []FrameSymbol `json:"frames"`
}

func emitSnapshot(t *target, s ptrace.Sample, st unwind.Stack, stack unwind.StackBounds, pac uint64, thread string) error {
	snap := unwind.Snapshot{
		Comment: fmt.Sprintf("%s thread %q, captured live by emu/capture under full-system emulation", t.name, thread),
		Regs:    s.Regs,
		Stack:   stack,
		PACMask: pac,
		Modules: t.snap,
		Expect:  &unwind.SnapshotExpect{Complete: st.Complete},
	}
	var hi uint64
	for _, f := range st.Frames {
		snap.Expect.PCs = append(snap.Expect.PCs, f.PC)
		snap.Expect.Methods = append(snap.Expect.Methods, f.Method.String())
		hi = max(hi, f.SP)
	}
	// Keep the window small: up to 1 KiB above the outermost frame's SP,
	// if the replay of the trimmed window gives the same walk.
	snap.Window = unwind.SnapshotWindow{Base: s.StackAddr, Bytes: s.Stack}
	if n := hi + 1024 - s.StackAddr; hi >= s.StackAddr && n < uint64(len(s.Stack)) {
		trimmed := snap
		trimmed.Window.Bytes = s.Stack[:n]
		if r, err := trimmed.Walk(Options(s.Regs.Arch, t.mods, unwind.StackBounds{}, 0)); err == nil && trimmed.Check(r) == nil {
			snap = trimmed
		}
	}
	var side Sidecar
	side.Fixture, side.Thread, side.Method = t.name, thread, callerMethod(t.name).String()
	for _, e := range spinThreads {
		if e.comm == thread {
			side.Chain = e.chain
		}
	}
	for i, f := range st.Frames {
		pc := f.PC
		if i > 0 {
			pc--
		}
		if sym, ok := t.symbolize(pc); ok {
			side.Frames = append(side.Frames, FrameSymbol{PC: f.PC, Name: sym.Name, Start: sym.Value, Size: sym.Size})
		}
	}
	base := fmt.Sprintf("%s-%s", strings.TrimPrefix(t.name, "spin-"), thread)
	var b bytes.Buffer
	if _, err := snap.WriteTo(&b); err != nil {
		return err
	}
	emit(base+".snapshot.json", b.Bytes())
	js, err := json.MarshalIndent(side, "", "\t")
	if err != nil {
		return err
	}
	emit(base+".symbols.json", append(js, '\n'))
	return nil
}

// emit prints a file as gzip+base64 between markers on the console.
func emit(name string, data []byte) {
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	w.Write(data)
	w.Close()
	enc := base64.StdEncoding.EncodeToString(z.Bytes())
	fmt.Printf("CAPTURE-BEGIN %s\n", name)
	for len(enc) > 0 {
		n := min(len(enc), 76)
		fmt.Println(enc[:n])
		enc = enc[n:]
	}
	fmt.Printf("CAPTURE-END %s\n", name)
}
