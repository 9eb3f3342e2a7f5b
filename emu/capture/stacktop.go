//go:build linux

package main

// Checks of the real CLI (/stacktop) inside the emulated machine: dump and
// record of every fixture, and Go stack switches in goprog (arm64).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

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
