//go:build linux

package ptrace

import (
	"fmt"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStraysWithoutChildrenFile: where /proc/thread-self/children cannot
// be read (a kernel without CONFIG_PROC_CHILDREN, or a masked /proc),
// hasChildren says "none", and a tracer thread that forked a child takes
// one wait4 for any tracee as safe (strays false): the child's exit
// status is taken from its owner. Simulated here by bind-mounting
// /dev/null over that one thread's children file, in a mount namespace
// of the thread's own.
func TestStraysWithoutChildrenFile(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("needs root for the mount namespace")
	}
	tg := startTarget(t, "spin", "2")
	tr := newTracer()
	started := make(chan struct{})
	child := exec.Command("true")
	ready := make(chan error, 1)
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// loop would give the main thread back (strays anyway):
			// start over on another goroutine.
			runtime.UnlockOSThread()
			go run()
			return
		}
		tid := unix.Gettid()
		// This thread only: its own fs_struct and mount namespace.
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			ready <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
			ready <- fmt.Errorf("mount private: %w", err)
			return
		}
		children := fmt.Sprintf("/proc/%d/task/%d/children", unix.Getpid(), tid)
		if err := unix.Mount("/dev/null", children, "", unix.MS_BIND, ""); err != nil {
			ready <- fmt.Errorf("bind mount over %s: %w", children, err)
			return
		}
		if err := child.Start(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		tr.loop(started, 0, nil) // the normal path of NewTracer
	}
	go run()
	if err := <-ready; err != nil {
		t.Skip(err)
	}
	<-started
	defer tr.Close()
	t.Logf("tracer thread %d, strays %v, child %d", tr.tid, tr.strays, child.Process.Pid)
	// (No waitState: the exit's SIGCHLD alone prompts a drain, which
	// may take the status before any attach.)
	time.Sleep(50 * time.Millisecond)
	lazyDumpsLeaveChild(t, tr, tg.pid, 3, child, fmt.Sprintf("the tracer thread's own child (strays %v)", tr.strays))
}
