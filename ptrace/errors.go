//go:build linux

package ptrace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"codeberg.org/stacktop/stacktop/procmaps"
)

var (
	// ErrThreadExited: the thread exited (or was reaped by an execve of
	// another thread) before or while it was sampled. Not fatal.
	ErrThreadExited = errors.New("ptrace: thread exited")
	// ErrProcessExited: the whole process is gone; Detach is still safe.
	ErrProcessExited = errors.New("ptrace: process exited")
	// ErrDetached: the Process was detached (by Detach or DetachAll).
	ErrDetached = errors.New("ptrace: process detached")
	// ErrUnknownThread: the TID is not a thread of the process (never seen).
	ErrUnknownThread = errors.New("ptrace: not a traced thread of this process")
	// ErrThreadBlocked: the thread is in an uninterruptible sleep (state
	// D) and did not stop within blockedGrace; it was not sampled. Not
	// fatal: it stops, and is resumed, when the sleep ends.
	ErrThreadBlocked = errors.New("ptrace: thread in uninterruptible sleep (D), not stopped")
	// ErrLazyFreeze: Freeze of a Process attached with AttachLazy, which
	// does not trace every thread; a snapshot needs Attach.
	ErrLazyFreeze = errors.New("ptrace: Freeze needs every thread attached (Attach, not AttachLazy)")
	// ErrTracerClosed: the Tracer was closed.
	ErrTracerClosed = errors.New("ptrace: tracer closed")
	// ErrUnsupportedArch: this GOARCH has no register conversion.
	ErrUnsupportedArch = errors.New("ptrace: register layout of this architecture is not supported")
)

// AttachCause classifies why Attach failed.
type AttachCause uint8

const (
	CauseOther         AttachCause = iota
	CauseNoProcess                 // ESRCH, or /proc/PID absent
	CausePermission                // EPERM from PTRACE_SEIZE
	CauseKernelThread              // PF_KTHREAD: no user space to sample
	CauseZombie                    // state Z: exited, not reaped
	CauseSelf                      // stacktop's own process
	CauseAlreadyTraced             // another tracer (gdb, strace) holds it
)

func (c AttachCause) String() string {
	switch c {
	case CauseNoProcess:
		return "no such process"
	case CausePermission:
		return "permission denied"
	case CauseKernelThread:
		return "kernel thread"
	case CauseZombie:
		return "zombie process"
	case CauseSelf:
		return "own process"
	case CauseAlreadyTraced:
		return "already traced"
	}
	return "attach failed"
}

// AttachError says why PID could not be attached, with what the CLI needs
// to tell the user what to do. Fields that could not be determined keep
// their zero value, or -1 where zero is meaningful (uids, ptrace scope).
type AttachError struct {
	PID   int
	TID   int // the thread whose seize failed (PID for the main thread)
	Cause AttachCause
	Err   error // the underlying errno or file error, if any
	Comm  string

	// Diagnostics for CausePermission (and CauseAlreadyTraced).
	UID, EUID    int    // ours
	TargetUIDs   [4]int // real, effective, saved, filesystem; -1 if unknown
	PtraceScope  int    // /proc/sys/kernel/yama/ptrace_scope; -1 without Yama
	CapSysPtrace bool   // CAP_SYS_PTRACE in our effective set
	NonDumpable  bool   // /proc/PID owned by root though the target is not root
	TracerPID    int    // TracerPid of the target (someone else tracing it)
	TracerComm   string
	InContainer  bool // /.dockerenv, /run/.containerenv or a container cgroup
}

func (e *AttachError) Unwrap() error { return e.Err }

// Error returns "cause: detail" and, after a newline, what to do.
func (e *AttachError) Error() string {
	who := fmt.Sprintf("pid %d", e.PID)
	if e.Comm != "" {
		who += " (" + e.Comm + ")"
	}
	if e.TID != 0 && e.TID != e.PID {
		who += fmt.Sprintf(" thread %d", e.TID)
	}
	switch e.Cause {
	case CauseNoProcess:
		return fmt.Sprintf("attach %s: no such process\ncheck the PID (ps -p %d); it may have exited", who, e.PID)
	case CauseSelf:
		return fmt.Sprintf("attach %s: that is stacktop itself\na process cannot trace itself; pick another PID", who)
	case CauseKernelThread:
		return fmt.Sprintf("attach %s: kernel thread, it has no user-space stack\npick a user-space process", who)
	case CauseZombie:
		return fmt.Sprintf("attach %s: zombie (exited, not yet reaped by its parent)\nnothing left to sample", who)
	case CauseAlreadyTraced:
		t := strconv.Itoa(e.TracerPID)
		if e.TracerComm != "" {
			t += " (" + e.TracerComm + ")"
		}
		return fmt.Sprintf("attach %s: already traced by pid %s\ndetach that debugger or tracer first", who, t)
	case CausePermission:
		why, todo := e.permissionAdvice()
		return fmt.Sprintf("attach %s: permission denied: %s\n%s", who, why, todo)
	}
	return fmt.Sprintf("attach %s: %v", who, e.Err)
}

func (e *AttachError) permissionAdvice() (why, todo string) {
	container := ""
	if e.InContainer {
		container = " (in a container: docker run --cap-add=SYS_PTRACE)"
	}
	switch {
	case e.PtraceScope == 3:
		return "kernel.yama.ptrace_scope=3 forbids all ptrace attaching",
			"scope 3 cannot be lowered without a reboot"
	case e.PtraceScope == 2 && !e.CapSysPtrace:
		return "kernel.yama.ptrace_scope=2 allows attaching only with CAP_SYS_PTRACE",
			"run as root or with CAP_SYS_PTRACE" + container
	case !e.CapSysPtrace && e.TargetUIDs[0] >= 0 && !e.sameUIDs():
		return fmt.Sprintf("target runs as uid %d (euid %d), we run as uid %d (euid %d) without CAP_SYS_PTRACE",
				e.TargetUIDs[0], e.TargetUIDs[1], e.UID, e.EUID),
			fmt.Sprintf("run stacktop as uid %d or as root", e.TargetUIDs[0]) + container
	case !e.CapSysPtrace && e.NonDumpable:
		return "target is not dumpable (setuid/setcap binary or prctl(PR_SET_DUMPABLE, 0))",
			"run stacktop as root" + container
	case !e.CapSysPtrace && e.PtraceScope == 1:
		return "kernel.yama.ptrace_scope=1 allows attaching only to descendants",
			"run as root, or: sysctl kernel.yama.ptrace_scope=0"
	case e.InContainer:
		return "refused although the uid and capabilities allow it; the container's seccomp profile or an LSM blocks ptrace",
			"docker run --cap-add=SYS_PTRACE --security-opt seccomp=unconfined, or run on the host"
	}
	return "refused by the kernel (an LSM such as SELinux/AppArmor, or seccomp)",
		"check the audit log (dmesg, journalctl) for a denial"
}

func (e *AttachError) sameUIDs() bool {
	for _, u := range e.TargetUIDs {
		if u != e.UID {
			return false
		}
	}
	return e.UID == e.EUID
}

// newAttachError builds an AttachError of the given cause and gathers the
// diagnostics from /proc. It never fails: missing facts stay unset.
func newAttachError(pid, tid int, cause AttachCause, err error) *AttachError {
	e := &AttachError{PID: pid, TID: tid, Cause: cause, Err: err,
		UID: os.Getuid(), EUID: os.Geteuid(), TargetUIDs: [4]int{-1, -1, -1, -1}, PtraceScope: -1}
	e.Comm = procmaps.Comm(pid)
	if st, err := procmaps.ReadStatus(pid, 0); err == nil {
		e.TargetUIDs, e.TracerPID = st.UIDs, st.TracerPID
	}
	if e.TracerPID != 0 {
		// TracerPid is the tracer's thread; name its process.
		if s, err := procmaps.ReadStatus(e.TracerPID, 0); err == nil {
			e.TracerPID = s.Tgid
		}
		e.TracerComm = procmaps.Comm(e.TracerPID)
	}
	e.PtraceScope = procmaps.PtraceScope()
	if self, err := procmaps.ReadStatus(os.Getpid(), 0); err == nil {
		const capSysPtrace = 19
		e.CapSysPtrace = self.CapEff&(1<<capSysPtrace) != 0
	}
	// /proc/PID/* of a non-dumpable process belongs to root; only telling
	// when the target itself does not run as root.
	if owner, err := procmaps.StatOwner(pid); err == nil && e.TargetUIDs[1] > 0 {
		e.NonDumpable = owner == 0
	}
	e.InContainer = inContainer()
	return e
}

func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	b := procmaps.InitCgroup()
	for _, w := range []string{"docker", "kubepods", "containerd", "lxc", "libpod", "podman"} {
		if bytes.Contains(b, []byte(w)) {
			return true
		}
	}
	return os.Getenv("container") != ""
}

const pfKthread = 0x00200000 // PF_KTHREAD in stat's flags field
