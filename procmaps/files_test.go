package procmaps

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChildrenAndNames(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exec sleep 10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := os.Getpid()
	// The child may belong to any of our threads: Children looks at all.
	kids, err := Children(pid)
	if err != nil || !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("Children(self) = %v, %v; want %d among them", kids, err, cmd.Process.Pid)
	}
	if _, err := Children(1 << 23); err == nil {
		t.Error("Children of a PID above PID_MAX_LIMIT succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for Comm(cmd.Process.Pid) != "sleep" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // until sh has exec'd
	}
	if c := Comm(cmd.Process.Pid); c != "sleep" {
		t.Errorf("Comm = %q, want sleep", c)
	}
	var buf [64]byte
	name, err := ThreadName(cmd.Process.Pid, cmd.Process.Pid, buf[:])
	if err != nil || string(name) != "sleep" {
		t.Errorf("ThreadName = %q, %v; want sleep", name, err)
	}
	if _, err := ThreadName(cmd.Process.Pid, 1<<23, buf[:]); err == nil {
		t.Error("ThreadName of a thread that does not exist succeeded")
	}
	if uid, err := StatOwner(pid); err != nil || uid != os.Geteuid() {
		t.Errorf("StatOwner(self) = %d, %v; want %d", uid, err, os.Geteuid())
	}
	f, err := OpenMem(pid)
	if err != nil {
		t.Fatalf("OpenMem(self): %v", err)
	}
	f.Close()
	if !strings.HasSuffix(RootDir(pid), "/root") || PtraceScope() < -1 {
		t.Errorf("RootDir %q, PtraceScope %d", RootDir(pid), PtraceScope())
	}
}
