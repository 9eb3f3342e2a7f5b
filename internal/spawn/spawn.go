// Package spawn starts the command of `record -- CMD` and `top -- CMD` so
// that stacktop can attach to it before its first instruction, without the
// command being a child of stacktop (see Cmd for why).
//
// Lifecycle: a program that uses Start calls RunHelper first thing in
// main (or an init): the helper is the program itself, re-executed with an
// environment variable set, and RunHelper runs it and exits. Start returns
// a Cmd stopped before exec; the caller attaches to Cmd.PID, then Release
// lets the command exec, End (when the recording ends before the command,
// at the end of --duration) asks it to exit as timeout(1) would, Wait
// collects its exit status, and Abandon (on every failure path) makes a
// command that never ran exit without running.
package spawn

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// ExitFailed is the status Wait reports, and the helper exits with, when
// the command could not be run for a reason of stacktop's own (its own
// exit codes, 126 and 127, keep the shell's meaning).
const ExitFailed = 125

// helperEnv marks the helper process (see Cmd).
const helperEnv = "STACKTOP_RECORD_SPAWN"

// RunHelper runs the helper and exits when this process is one (the
// environment says so); otherwise it returns at once. settle, if not nil,
// runs first in the helper: what the program's start-up changed that the
// command must not inherit (its priority) is undone there.
func RunHelper(settle func()) {
	if os.Getenv(helperEnv) == "1" {
		if settle != nil {
			settle()
		}
		os.Exit(helper(os.Args[1:]))
	}
}

// PID is the command's process ID: attach to it before Release.
func (s *Cmd) PID() int { return s.pid }

// Cmd is a command started for `record -- CMD` or `top -- CMD`.
//
// The command must not be stacktop's child: a tracer thread waits for its
// tracees, and os/exec's wait4(pid) running on another thread would steal
// the ptrace stops of the command's main thread (any thread may reap
// events of the process's children). So stacktop starts a helper, itself
// re-executed with helperEnv set (see RunHelper); the helper starts "sh -c 'read; exec
// CMD'" and reports its PID. stacktop attaches to that shell while it
// waits on the go pipe, releases it, and the shell execs CMD: sampling
// covers CMD from its first instruction. The helper, CMD's parent, waits
// for it and passes its exit status back on the status pipe.
type Cmd struct {
	pid    int // the shell that execs the command once released
	helper *exec.Cmd
	goW    *os.File
	status *os.File
	ended  bool // the helper signalled the command on End's request (Wait)
}

// Start starts argv with stdio as its standard input, output and
// error (record passes the terminal's; top, which owns the terminal, passes
// /dev/null).
func Start(argv []string, stdio [3]*os.File) (*Cmd, error) {
	if err := CheckRunnable(argv[0]); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pidR, pidW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	helper := exec.Command(self, argv...)
	helper.Env = append(os.Environ(), helperEnv+"=1")
	helper.Stdin, helper.Stdout, helper.Stderr = stdio[0], stdio[1], stdio[2]
	helper.ExtraFiles = []*os.File{statusW, goR, pidW} // fds 3, 4, 5
	err = helper.Start()
	statusW.Close()
	goR.Close()
	pidW.Close()
	if err != nil {
		statusR.Close()
		goW.Close()
		pidR.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	s := &Cmd{helper: helper, goW: goW, status: statusR}
	// A short read (the helper died before writing) leaves line without
	// a number, which Atoi refuses.
	line, _ := bufio.NewReader(pidR).ReadString('\n')
	pidR.Close()
	if s.pid, err = strconv.Atoi(strings.TrimSpace(line)); err != nil || s.pid <= 0 {
		s.Abandon()
		return nil, fmt.Errorf("starting %s: the helper reported no PID", argv[0])
	}
	return s, nil
}

// Release lets the command exec.
func (s *Cmd) Release() error {
	_, err := s.goW.Write([]byte("go\n"))
	s.goW.Close()
	s.goW = nil
	if err != nil {
		return fmt.Errorf("releasing the command: %w", err)
	}
	return nil
}

// Wait returns the command's exit status as a shell reports it (128+N
// when killed by signal N).
func (s *Cmd) Wait() (int, error) {
	line, rerr := bufio.NewReader(s.status).ReadString('\n')
	s.status.Close()
	s.status = nil
	werr := s.helper.Wait()
	// "STATUS ENDED": ENDED is 1 if the helper signalled the command on
	// End's request.
	code, ended, _ := strings.Cut(strings.TrimSpace(line), " ")
	status, err := strconv.Atoi(code)
	if err != nil {
		if rerr == nil {
			rerr = werr
		}
		return 0, fmt.Errorf("no exit status from the command's helper: %v", rerr)
	}
	s.ended = ended == "1"
	return status, nil
}

// Ended reports, once Wait returned, whether End (or EndWhen) ended the
// command: it was still running when the request came, and was sent
// SIGTERM. A command that exited on its own first reports false.
func (s *Cmd) Ended() bool { return s.ended }

// EndGrace is how long End's SIGTERM has before the command is killed:
// short, so that a recording with --duration ends within a second of its
// deadline whatever the command does.
const EndGrace = 500 * time.Millisecond

// endSignal is what End sends the helper: it ends the command.
const endSignal = syscall.SIGUSR1

// End asks the command to exit, as timeout(1) does: SIGTERM, then SIGKILL
// if it still runs EndGrace later. It returns at once; Wait reports the
// command's status (143 or 137 if it died of those signals). The helper,
// the command's parent, sends the signals: it alone knows whether the
// command has been reaped, so a signal never reaches a process that
// reused its PID. A command that already exited is left alone.
func (s *Cmd) End() error {
	if err := s.helper.Process.Signal(endSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("ending the command: %w", err)
	}
	return nil
}

// EndWhen ends the command (End) if the recording ends without it: just
// after d (--duration; 0: never), once the recording's own deadline has
// passed, or EndGrace after interrupted closes (a signal ended the
// recording; Ctrl-C reached the command too, which gets that long to exit
// by itself). Call stop once the command's status is in (Wait returned):
// it cancels what has not happened and says why the command was ended,
// "duration" or "signal", or "" if it was not (it exited on its own,
// also when End came too late to find it).
func (s *Cmd) EndWhen(d time.Duration, interrupted <-chan struct{}) (stop func() (why string)) {
	quit := make(chan struct{})
	result := make(chan string, 1)
	go func() { result <- s.endWhen(d, interrupted, quit) }()
	return func() string {
		close(quit)
		why := <-result
		if !s.ended {
			return ""
		}
		return why
	}
}

// endLag is how long after --duration EndWhen ends the command: the
// recording's deadline, counted from a moment later than EndWhen's, comes
// first, so that no sample shows the command's handling of SIGTERM.
const endLag = 20 * time.Millisecond

func (s *Cmd) endWhen(d time.Duration, interrupted, quit <-chan struct{}) string {
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d + endLag)
		defer t.Stop()
		deadline = t.C
	}
	why := "duration"
	select {
	case <-deadline:
	case <-interrupted:
		why = "signal"
		grace := time.NewTimer(EndGrace)
		defer grace.Stop()
		select {
		case <-grace.C:
		case <-quit:
			return ""
		}
	case <-quit:
		return ""
	}
	s.End()
	return why
}

// Abandon kills what is left of a command whose recording failed: closing
// the go pipe makes a command that was never released exit without
// running.
func (s *Cmd) Abandon() {
	if s.goW != nil {
		s.goW.Close()
		s.goW = nil
	}
	if s.status != nil {
		s.status.Close()
		s.status = nil
		s.helper.Wait()
	}
}

// spawnHelper is the helper process of `record -- CMD` (see Cmd):
// fd 3 status pipe (write), fd 4 go pipe (read), fd 5 PID pipe (write).
func helper(argv []string) int {
	os.Unsetenv(helperEnv)
	status, goR, pidW := os.NewFile(3, "status"), os.NewFile(4, "go"), os.NewFile(5, "pid")
	// Ctrl-C reaches the whole foreground process group: the command
	// decides what to do with it, the helper must live on to report its
	// status. A handler (not SIG_IGN) so the command gets the default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGQUIT)
	if len(argv) == 0 {
		return ExitFailed
	}
	// Registered before the PID is reported: End may come at once.
	endReq := make(chan os.Signal, 1)
	signal.Notify(endReq, endSignal)
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r _ <&3 || exit 125; exec 3<&- "$0" "$@"`}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{goR}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return ExitFailed
	}
	goR.Close()
	fmt.Fprintf(pidW, "%d\n", cmd.Process.Pid)
	pidW.Close()
	exited := make(chan struct{})
	ended := make(chan bool, 1)
	go func() { ended <- endOnRequest(cmd.Process, endReq, exited) }()
	err := cmd.Wait()
	close(exited)
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		code = ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	case err != nil:
		code = ExitFailed
	}
	endedFlag := 0
	if <-ended {
		endedFlag = 1
	}
	fmt.Fprintf(status, "%d %d\n", code, endedFlag)
	status.Close()
	return 0
}

// Exit codes of a command that cannot be started, as a shell reports them.
const (
	ExitNotExecutable = 126 // found, but not an executable file
	ExitNotFound      = 127 // no such file, or not in PATH
)

// StartError is a `-- CMD` that cannot be run. It is found before anything
// is started or attached, so record writes no profile and top shows no UI;
// stacktop exits with Code, the shell's status for the same failure.
type StartError struct {
	Name string
	Err  error
	Code int
}

func (e *StartError) Error() string {
	return fmt.Sprintf("cannot run %s: %v", procmaps.EscapeControl(e.Name), e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// CheckRunnable finds name as the shell that runs it will (PATH when it
// has no slash) and tells why it cannot be executed, if it cannot.
func CheckRunnable(name string) error {
	_, err := exec.LookPath(name)
	if err == nil {
		return nil
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err
	}
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return &StartError{Name: name, Err: errors.New("not found in PATH"), Code: ExitNotFound}
	case errors.Is(err, fs.ErrNotExist):
		return &StartError{Name: name, Err: errors.New("no such file or directory"), Code: ExitNotFound}
	case errors.Is(err, fs.ErrPermission):
		return &StartError{Name: name, Err: errors.New("permission denied (not executable)"), Code: ExitNotExecutable}
	default:
		return &StartError{Name: name, Err: err, Code: ExitNotExecutable}
	}
}

// FailureCode is the exit code for err from Start (or a caller that wraps it): the
// shell's code when the command cannot be run, else fail.
func FailureCode(err error, fail int) int {
	var se *StartError
	if errors.As(err, &se) {
		return se.Code
	}
	return fail
}

// endOnRequest ends p when End's signal arrives on req: SIGTERM, then
// SIGKILL after EndGrace, unless p exited (exited closed) in between. It
// reports whether it sent SIGTERM to a p still running. os.Process
// signals through a pidfd, so a late request cannot hit another process.
func endOnRequest(p *os.Process, req <-chan os.Signal, exited <-chan struct{}) bool {
	select {
	case <-req:
	case <-exited:
		return false
	}
	if p.Signal(syscall.SIGTERM) != nil {
		return false // already exited (os.ErrProcessDone)
	}
	select {
	case <-time.After(EndGrace):
		p.Kill()
	case <-exited:
	}
	return true
}
