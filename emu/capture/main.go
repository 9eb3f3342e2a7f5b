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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
