package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"stacktop/procmaps"
)

// Exit codes of a command that cannot be started, as a shell reports them.
const (
	exitCmdNotExecutable = 126 // found, but not an executable file
	exitCmdNotFound      = 127 // no such file, or not in PATH
)

// startError is a `-- CMD` that cannot be run. It is found before anything
// is started or attached, so record writes no profile and top shows no UI;
// stacktop exits with Code, the shell's status for the same failure.
type startError struct {
	Name string
	Err  error
	Code int
}

func (e *startError) Error() string {
	return fmt.Sprintf("cannot run %s: %v", procmaps.EscapeControl(e.Name), e.Err)
}

func (e *startError) Unwrap() error { return e.Err }

// checkRunnable finds name as the shell that runs it will (PATH when it
// has no slash) and tells why it cannot be executed, if it cannot.
func checkRunnable(name string) error {
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
		return &startError{Name: name, Err: errors.New("not found in PATH"), Code: exitCmdNotFound}
	case errors.Is(err, fs.ErrNotExist):
		return &startError{Name: name, Err: errors.New("no such file or directory"), Code: exitCmdNotFound}
	case errors.Is(err, fs.ErrPermission):
		return &startError{Name: name, Err: errors.New("permission denied (not executable)"), Code: exitCmdNotExecutable}
	default:
		return &startError{Name: name, Err: err, Code: exitCmdNotExecutable}
	}
}

// startFailureCode is the exit code for err from startSession: the
// shell's code when the command cannot be run, else fail.
func startFailureCode(err error, fail int) int {
	var se *startError
	if errors.As(err, &se) {
		return se.Code
	}
	return fail
}

// checkTIDs requires every TID of --tid to be a thread of pid: sampling
// nothing at all and writing an empty profile would hide the mistake.
func checkTIDs(pid int, tids, threads []int) error {
	var bad []string
	for _, tid := range tids {
		if !slices.Contains(threads, tid) {
			bad = append(bad, strconv.Itoa(tid))
		}
	}
	switch len(bad) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("--tid %s is not a thread of process %d (its threads are in /proc/%d/task)", bad[0], pid, pid)
	default:
		return fmt.Errorf("--tid %s are not threads of process %d (its threads are in /proc/%d/task)", strings.Join(bad, ","), pid, pid)
	}
}
