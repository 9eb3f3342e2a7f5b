package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// A hostile target chooses the files stacktop opens on its behalf: its
// debug links, the build-ID paths inside its root, the files behind its
// mappings. These tests build the attacker's fixture, run the real binary
// against it and check that it neither hangs, nor reads what the target's
// user could not, nor leaves the target traced.

// hostileSource spins in a function of its own, so a stack names it.
const hostileSource = `#include <stdio.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void hostile_spin(void) {
	for (unsigned long i = 0; i < 20000000; i++)
		sink += i;
}
int main(void) {
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		hostile_spin();
		usleep(1000);
	}
}
`

// buildHostile compiles hostileSource into dir/name with extra gcc flags,
// its DWARF moved to dir/name.debug and linked from the program by
// .gnu_debuglink. It returns the program's path.
func buildHostile(t *testing.T, dir, name string, flags ...string) string {
	t.Helper()
	for _, tool := range []string{"gcc", "objcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	src := filepath.Join(dir, name+".c")
	if err := os.WriteFile(src, []byte(hostileSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	mustRun(t, "gcc", append([]string{"-O1", "-g", "-fno-omit-frame-pointer", "-Wl,--build-id", "-o", bin, src}, flags...)...)
	dbg := bin + ".debug"
	mustRun(t, "objcopy", "--only-keep-debug", bin, dbg)
	mustRun(t, "objcopy", "--strip-debug", "--add-gnu-debuglink="+dbg, bin)
	return bin
}

// elfBuildID is the build ID of the ELF file at path.
func elfBuildID(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := buildid.Read(f)
	if err != nil || len(id) < 4 {
		t.Fatalf("no build ID in %s: %v", path, err)
	}
	return id
}

// replaceWithFIFO puts a FIFO where path was: an open for reading of it
// waits for a writer that never comes.
func replaceWithFIFO(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runBounded runs the stacktop binary with args and fails the test if it
// has not ended after a minute: the cases here hung before the fix.
func runBounded(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, stacktopBin, args...)
	r := run(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("stacktop %s hung (killed after a minute)\nstderr:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r
}

// checkLetGo fails the test if the target is still traced or stopped.
func checkLetGo(t *testing.T, tg *targets.Target) {
	t.Helper()
	st, err := procmaps.ReadStatus(tg.PID(), 0)
	if err != nil {
		t.Fatalf("target's status: %v", err)
	}
	if st.TracerPID != 0 {
		t.Errorf("target still traced by %d", st.TracerPID)
	}
	states, err := targets.ThreadStates(tg.PID())
	if err != nil {
		t.Fatal(err)
	}
	for tid, s := range states {
		if s == 't' || s == 'T' {
			t.Errorf("target thread %d left in state %c", tid, s)
		}
	}
}

// TestHostileDebugLinkFIFO: a debug link that names a FIFO. Before,
// dump, dump --no-lines and record opened it and waited for ever, the
// target traced.
func TestHostileDebugLinkFIFO(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	bin := buildHostile(t, dir, "prog")
	replaceWithFIFO(t, bin+".debug")
	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	pid := fmt.Sprint(tg.PID())
	for _, args := range [][]string{
		{"dump", "-p", pid},
		{"dump", "--no-lines", "--no-debuginfod", "-p", pid},
		{"record", "--duration", "1s", "-o", filepath.Join(dir, "out.txt"), "-p", pid},
	} {
		r := runBounded(t, args...)
		if r.code != 0 {
			t.Errorf("stacktop %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		if args[0] == "dump" && !strings.Contains(r.stdout, "hostile_spin") && !strings.Contains(r.stdout, "usleep") {
			t.Errorf("stacktop %s: no stack of the target's own:\n%s", strings.Join(args, " "), r.stdout)
		}
		checkLetGo(t, tg)
	}
}

// TestHostileBuildIDFIFO: a target in a chroot of its own puts a FIFO at
// its build-ID debug path (/usr/lib/debug/.build-id/..), which stacktop
// searches inside the target's root first.
func TestHostileBuildIDFIFO(t *testing.T) {
	t.Parallel()
	needRoot(t)
	root := t.TempDir()
	bin := buildHostile(t, root, "prog", "-static")
	id := elfBuildID(t, bin)
	at := filepath.Join(root, "usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}
	replaceWithFIFO(t, at)
	tg := targets.StartCommand(t, "chroot", root, "/prog")
	<-tg.Ready()
	r := runBounded(t, "dump", "-p", fmt.Sprint(tg.PID()))
	if r.code != 0 || !strings.Contains(r.stdout, "hostile_spin") && !strings.Contains(r.stdout, "nanosleep") {
		t.Errorf("dump: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkLetGo(t, tg)
}

// TestHostileDebugLinkToRootOnly: a target running as nobody links its
// debug file to a file only root may read (here: its real debug file,
// mode 0600, so that reading it would show). stacktop, running as root,
// must not read it for the target: no source lines. With the file
// readable by everyone, the same dump has them (the fixture works).
func TestHostileDebugLinkToRootOnly(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	dir := t.TempDir()
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 && strings.HasPrefix(d, os.TempDir()) && d != os.TempDir() {
			os.Chmod(d, fi.Mode().Perm()|0o005) // nobody runs the program
		}
	}
	bin := buildHostile(t, dir, "prog")
	secret := filepath.Join(dir, "secret")
	if err := os.Rename(bin+".debug", secret); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, bin+".debug"); err != nil {
		t.Fatal(err)
	}
	tg := targets.StartCommand(t, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin)
	<-tg.Ready()
	pid := fmt.Sprint(tg.PID())
	for _, tc := range []struct {
		mode  os.FileMode
		lines bool
	}{{0o644, true}, {0o600, false}} {
		if err := os.Chmod(secret, tc.mode); err != nil {
			t.Fatal(err)
		}
		// A fresh cache each time: the point is what is opened now.
		cmd := exec.Command(stacktopBin, "dump", "--no-debuginfod", "-p", pid)
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
		r := run(t, cmd)
		if r.code != 0 {
			t.Fatalf("dump: exit %d\n%s", r.code, r.stderr)
		}
		if got := strings.Contains(r.stdout, "prog.c:"); got != tc.lines {
			t.Errorf("debug file of mode %04o behind the link: source lines %v, want %v\n%s", tc.mode, got, tc.lines, r.stdout)
		}
	}
	checkLetGo(t, tg)
}

// spinLibSource is a library whose spin calls a loop named NAME (the
// attacker's and the victim's names have one length, so that their files
// have one size).
const spinLibSource = `volatile unsigned long sink;
__attribute__((noinline)) void NAME(void) {
	for (unsigned long i = 0; i < 20000000; i++)
		sink += i;
}
void spin(void) { NAME(); }
`

const spinMainSource = `#include <stdio.h>
#include <unistd.h>
void spin(void);
int main(void) {
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		spin();
		usleep(1000);
	}
}
`

// TestHostileCacheKey: an attacker's library that claims a victim
// library's build ID, with its size and modification time, is dumped
// first. Before, the symbol cache, keyed by those three, then named the
// victim's frames with the attacker's functions in later runs; and one
// run sampling both processes shared one module between them.
func TestHostileCacheKey(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	const buildID = "0x5eed0f5eed0f5eed0f5eed0f5eed0f5eed0f5eed"
	lib := func(sub, fn string) string {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(d, "spin.c")
		if err := os.WriteFile(src, []byte(strings.ReplaceAll(spinLibSource, "NAME", fn)), 0o644); err != nil {
			t.Fatal(err)
		}
		so := filepath.Join(d, "libspin.so")
		mustRun(t, "gcc", "-O1", "-fPIC", "-shared", "-fno-omit-frame-pointer", "-Wl,--build-id="+buildID, "-o", so, src)
		return so
	}
	evil, good := lib("evil", "evil_loop"), lib("good", "good_loop")
	ei, err := os.Stat(evil)
	if err != nil {
		t.Fatal(err)
	}
	gi, err := os.Stat(good)
	if err != nil {
		t.Fatal(err)
	}
	if ei.Size() != gi.Size() {
		t.Fatalf("the two libraries differ in size (%d, %d): the fixture cannot forge the old key", ei.Size(), gi.Size())
	}
	if err := os.Chtimes(evil, gi.ModTime(), gi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(evil, 65534, 65534); err != nil { // the attacker's own file
		t.Fatal(err)
	}
	mainSrc := filepath.Join(dir, "main.c")
	if err := os.WriteFile(mainSrc, []byte(spinMainSource), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(sub string) *targets.Target {
		bin := filepath.Join(dir, sub, sub+"main")
		mustRun(t, "gcc", "-O1", "-fno-omit-frame-pointer", "-o", bin, mainSrc, "-L"+filepath.Join(dir, sub), "-lspin",
			"-Wl,-rpath,"+filepath.Join(dir, sub))
		tg := targets.StartCommand(t, bin)
		<-tg.Ready()
		return tg
	}
	attacker, victim := start("evil"), start("good")
	cache := t.TempDir()
	dump := func(pid int) string {
		cmd := exec.Command(stacktopBin, "dump", "--no-debuginfod", "-p", fmt.Sprint(pid))
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
		r := run(t, cmd)
		if r.code != 0 {
			t.Fatalf("dump %d: exit %d\n%s", pid, r.code, r.stderr)
		}
		return r.stdout
	}
	// The attacker's dump fills the cache with its library's table (a
	// stack in its loop, not in usleep, names it too: tried a few times).
	for i := 0; i < 5 && !strings.Contains(dump(attacker.PID()), "evil_loop"); i++ {
	}
	for i := 0; i < 3; i++ { // a stack in the loop, not in usleep, names it
		out := dump(victim.PID())
		if strings.Contains(out, "evil_loop") {
			t.Fatalf("the victim's dump names the attacker's function:\n%s", out)
		}
		if strings.Contains(out, "good_loop") {
			break
		}
	}

	// Both in one run: the module of the attacker's file is not the
	// victim's, whatever build ID it claims.
	out := filepath.Join(dir, "both.pb.gz")
	cmd := exec.Command(stacktopBin, "record", "--duration", "1s", "-o", out, "-p",
		fmt.Sprintf("%d,%d", attacker.PID(), victim.PID()))
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	if r := run(t, cmd); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	prof := readPprof(t, out)
	// Whichever process's module is made first, the other's must not be
	// named from it.
	loops := map[int64]string{int64(attacker.PID()): "evil_loop", int64(victim.PID()): "good_loop"}
	saw := map[int64]bool{}
	for _, s := range prof.Sample {
		if len(s.NumLabel["pid"]) != 1 {
			continue
		}
		pid := s.NumLabel["pid"][0]
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if !strings.HasSuffix(line.Function.Name, "_loop") {
					continue
				}
				if line.Function.Name != loops[pid] {
					t.Fatalf("a stack of process %d names %s, the other's function", pid, line.Function.Name)
				}
				saw[pid] = true
			}
		}
	}
	if len(saw) != 2 {
		t.Errorf("stacks in the loops seen for %v, want both processes", saw)
	}
}

// TestHostileSuite runs dump and record against testdata/targets/hostile.c:
// frame pointers that cycle or point into unmapped or device memory, a
// stack pointer outside any mapping, a thread named with terminal escapes,
// JIT code whose perf-map name holds escapes (or a perf map that is a FIFO,
// or a symlink to /etc/shadow), a 4 GiB sparse file mapped executable.
// stacktop must end, say why each corrupt stack ends, print no escape
// sequence raw, name no JIT frame from a map it must not read, stay small,
// and let the target go.
func TestHostileSuite(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "hostile")
	mustRun(t, "gcc", "-O1", "-g", "-pthread", "-o", bin, filepath.Join("..", "..", "testdata", "targets", "hostile.c"))
	for _, mode := range []string{"names", "fifo", "link"} {
		t.Run(mode, func(t *testing.T) {
			tg := targets.StartCommand(t, bin, mode)
			<-tg.Ready()
			t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", tg.PID())) })
			pid := fmt.Sprint(tg.PID())
			folded := filepath.Join(dir, mode+".folded")
			for _, args := range [][]string{
				{"dump", "--no-debuginfod", "-p", pid},
				{"record", "--no-debuginfod", "--duration", "1s", "-o", folded, "-p", pid},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				cmd := exec.CommandContext(ctx, stacktopBin, args...)
				r := run(t, cmd)
				hung := ctx.Err() != nil
				cancel()
				if hung {
					t.Fatalf("stacktop %s hung", strings.Join(args, " "))
				}
				if args[0] == "dump" && r.code != 0 && r.code != 1 || args[0] == "record" && r.code != 0 {
					t.Errorf("stacktop %s: exit %d\n%s", args[0], r.code, r.stderr)
				}
				if strings.ContainsRune(r.stdout+r.stderr, '\x1b') {
					t.Errorf("stacktop %s printed an escape sequence raw:\n%q", args[0], r.stdout+r.stderr)
				}
				if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss; rss > 200<<10 {
					t.Errorf("stacktop %s grew to %d MB", args[0], rss>>10)
				}
				checkLetGo(t, tg)
				if args[0] != "dump" {
					continue
				}
				for _, name := range []string{"fp-cycle", "fp-unmapped", "fp-device", "sp-huge"} {
					i := strings.Index(r.stdout, `"`+name+`"`)
					if i < 0 {
						t.Fatalf("no thread %s in the dump:\n%s", name, r.stdout)
					}
					stack := r.stdout[i:]
					if j := strings.Index(stack, "\nTID "); j >= 0 {
						stack = stack[:j]
					}
					if !strings.Contains(stack, "(stack truncated: ") {
						t.Errorf("thread %s: its stack ends without saying why:\n%s", name, stack)
					}
				}
				if !strings.Contains(r.stdout, `"\x1b[2J\x1b]0;pw\a"`) {
					t.Errorf("the thread named with escapes is not shown escaped:\n%s", r.stdout)
				}
				jitNamed := strings.Contains(r.stdout, `\x1b[31mjit_red\x1b[0m`)
				if jitNamed != (mode == "names") {
					t.Errorf("JIT frame named from the perf map: %v, want %v (mode %s)", jitNamed, mode == "names", mode)
				}
			}
			b, err := os.ReadFile(folded)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.ContainsRune(b, '\x1b') {
				t.Errorf("the folded profile holds an escape sequence raw")
			}
			if mode == "names" {
				checkTopEscapes(t, tg)
			}
		})
	}
}

// checkTopEscapes runs top on the hostile target and looks at what it
// sends the terminal, in the functions view and the threads view: the
// target's escape sequences only ever escaped.
func checkTopEscapes(t *testing.T, tg *targets.Target) {
	t.Helper()
	cmd, master, screen, done := startTopPTY(t, tg.PID(), "49", true)
	defer master.Close()
	waitScreen := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(screen.String(), what); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				s := screen.String()
				t.Fatalf("top never showed %q; screen ends:\n%q", what, s[max(0, len(s)-500):])
			}
		}
	}
	waitScreen(`jit_red`)
	master.Write([]byte("3"))
	waitScreen(`\x1b[2J\x1b]0;p`) // escaped (and cut to the column)
	master.Write([]byte("q"))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("top did not quit")
	}
	s := screen.String()
	for _, raw := range []string{"\x1b[31mjit_red", "\x1b]0;pw"} {
		if strings.Contains(s, raw) {
			t.Errorf("top sent the target's escape sequence %q to the terminal raw", raw)
		}
	}
	checkLetGo(t, tg)
}
