// Package idlist parses the process and thread lists of stacktop's command
// line: -p PID[,PID...] and --tid TID[,TID...], the same syntax on every
// subcommand. A list is comma-separated (spaces around an ID are allowed),
// the flag may repeat, and an ID given twice is an error, as is one that no
// Linux system can have (outside [1, MaxID]).
package idlist

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxID is the kernel's PID_MAX_LIMIT on 64-bit systems: no PID or TID is
// larger.
const MaxID = 1 << 22

// PIDs is a flag.Value for -p.
type PIDs []int

func (l *PIDs) String() string { return format(*l) }

func (l *PIDs) Set(s string) error { return add((*[]int)(l), s, "process") }

// TIDs is a flag.Value for --tid.
type TIDs []int

func (l *TIDs) String() string { return format(*l) }

func (l *TIDs) Set(s string) error { return add((*[]int)(l), s, "thread") }

// Parse parses one comma-separated list of thread IDs ("" is none).
func Parse(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var l []int
	err := add(&l, s, "thread")
	return l, err
}

// PID is a flag.Value for a single process ID (dump's -p). Only its
// spelling is checked (ParsePID): a PID that no process can have is "no
// such process" at the attach, like any other PID that does not exist.
type PID int

func (p *PID) String() string { return strconv.Itoa(int(*p)) }

func (p *PID) Set(s string) error {
	id, err := ParsePID(s)
	if err != nil {
		return fmt.Errorf("bad process id %q (give a PID in decimal)", s)
	}
	*p = PID(id)
	return nil
}

// ParsePID parses a process or thread ID as /proc names them: decimal
// digits only, positive. strconv's base 0 would read "010" as 8 and
// "0x10" as 16, and dump (or freeze) another process than the one meant;
// here "010" is 10, and a sign, a base prefix or anything else is an
// error.
func ParsePID(s string) (int, error) {
	if s == "" || len(s) > 9 {
		return 0, strconv.ErrSyntax
	}
	id := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
		id = id*10 + int(c-'0')
	}
	if id <= 0 {
		return 0, strconv.ErrRange
	}
	return id, nil
}

// ParseID is ParsePID for the lists: also within [1, MaxID].
func ParseID(s string) (int, error) {
	id, err := ParsePID(s)
	if err == nil && id > MaxID {
		err = strconv.ErrRange
	}
	return id, err
}

func add(l *[]int, s, what string) error {
	for _, f := range strings.Split(s, ",") {
		id, err := ParseID(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("bad %s id %q (give IDs in [1, %d], separated by commas)", what, f, MaxID)
		}
		if slices.Contains(*l, id) {
			return fmt.Errorf("%s %d given twice", what, id)
		}
		*l = append(*l, id)
	}
	return nil
}

func format(l []int) string {
	parts := make([]string, len(l))
	for i, id := range l {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}

// CheckThreads requires every TID of tids to be one of threads, the
// threads of process pid: sampling nothing at all and writing an empty
// profile would hide the mistake.
func CheckThreads(pid int, tids, threads []int) error {
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
