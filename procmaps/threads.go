package procmaps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Threads lists the thread IDs of a process from /proc/PID/task, ascending.
// Threads come and go while a sampler runs: a TID in the list may be gone by
// the time it is read (fs.ErrNotExist or ESRCH from later calls).
//
// The directory is read with getdents64 into a pooled buffer and the TIDs
// are parsed from the records (ParseTaskDirents): os.ReadDir allocated a
// DirEntry and a name per thread, and read a thousand threads in five
// calls instead of one.
func Threads(pid int) ([]int, error) {
	path := procPath(pid, "task")
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("procmaps: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(fd)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var tids []int
	read := 0 // bytes of records parsed by earlier calls
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("procmaps: %w", &os.PathError{Op: "getdents", Path: path, Err: err})
		}
		if n == 0 {
			break
		}
		if tids == nil {
			tids = make([]int, 0, n/direntTIDSize+1)
		}
		if tids, err = ParseTaskDirents(buf[:n], tids); err != nil {
			if de, ok := err.(*DirentError); ok {
				de.Off += read // from the directory's first record
			}
			return nil, fmt.Errorf("procmaps: %s: %w", path, err)
		}
		read += n
	}
	if !slices.IsSorted(tids) { // the kernel lists them in creation order
		slices.Sort(tids)
	}
	return tids, nil
}

// direntBufs holds Threads' getdents buffers: 64 KiB is a single call
// for 2,000 threads (a TID's record is 32 bytes).
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// direntTIDSize is the size of a linux_dirent64 record of a TID of up to
// 12 digits: the 19 bytes of its header, the name and its NUL, rounded up
// to 8.
const direntTIDSize = 32

// DirentError reports a malformed linux_dirent64 record: the byte offset
// of the record (in the buffer ParseTaskDirents was given; from the
// directory's first record in Threads' errors), and what is wrong.
type DirentError struct {
	Off int
	Msg string
}

func (e *DirentError) Error() string {
	return fmt.Sprintf("directory record at offset %d: %s", e.Off, e.Msg)
}

// direntHeader is the size of linux_dirent64's fixed part: d_ino (8),
// d_off (8), d_reclen (2), d_type (1), then the NUL-terminated d_name.
const direntHeader = 19

// ParseTaskDirents appends to tids the thread IDs named by the
// linux_dirent64 records in buf (what getdents64 filled from a
// /proc/PID/task directory) and returns the result. Names that are not a
// positive decimal number ("." and "..") are skipped; a record whose
// length does not fit the buffer or its name is a *DirentError.
func ParseTaskDirents(buf []byte, tids []int) ([]int, error) {
	for off := 0; off < len(buf); {
		if len(buf)-off < direntHeader {
			return tids, &DirentError{Off: off, Msg: fmt.Sprintf("%d bytes left, shorter than a record header", len(buf)-off)}
		}
		reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
		if reclen <= direntHeader || reclen > len(buf)-off {
			return tids, &DirentError{Off: off, Msg: fmt.Sprintf("record length %d outside %d..%d", reclen, direntHeader+1, len(buf)-off)}
		}
		name := buf[off+direntHeader : off+reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		} else {
			return tids, &DirentError{Off: off, Msg: "name without a terminating NUL"}
		}
		if tid := parseTID(name); tid > 0 {
			tids = append(tids, tid)
		}
		off += reclen
	}
	return tids, nil
}

// parseTID returns the positive decimal number name spells, or 0 (not a
// number, a leading zero, or above 2^31-1: no TID is).
func parseTID(name []byte) int {
	if len(name) == 0 || len(name) > 10 || name[0] == '0' {
		return 0
	}
	n := 0
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	if n > 1<<31-1 {
		return 0
	}
	return n
}

// Stat is the subset of /proc/PID/task/TID/stat (proc(5)) a sampler needs.
type Stat struct {
	PID        int    // field 1: the thread ID when read from task/TID/stat
	Comm       string // field 2, without the parentheses; may hold spaces and ')'
	State      byte   // field 3: R, S, D, T, t, Z, X, I, ...
	PPID       int    // field 4
	Flags      uint64 // field 9: the kernel's PF_* flags (PF_KTHREAD, ...)
	UTime      uint64 // field 14: user CPU time, clock ticks
	STime      uint64 // field 15: system CPU time, clock ticks
	NumThreads int64  // field 20
	StartTime  uint64 // field 22: start time after boot, clock ticks
	Processor  int    // field 39: CPU last run on; -1 if the line is too short
}

// StatError reports a malformed stat line: the 1-based field number (as in
// proc(5)) and the byte offset where parsing failed.
type StatError struct {
	Field int
	Off   int
	Msg   string
}

func (e *StatError) Error() string {
	return fmt.Sprintf("procmaps: stat field %d at offset %d: %s", e.Field, e.Off, e.Msg)
}

// maxStatFields is how many fields after comm ParseStat keeps: it reads
// none past field 39 (processor); Linux 6 writes 50.
const maxStatFields = 40

// ParseStat parses the contents of a /proc/PID/stat or /proc/PID/task/TID/stat
// file. The comm field is delimited by the first '(' and the LAST ')', since
// a thread can name itself "a) (b" and only the fields after comm are
// guaranteed free of parentheses.
func ParseStat(b []byte) (Stat, error) {
	b = bytes.TrimRight(b, "\n")
	s, rest, off, err := parseStatHead(b)
	if err != nil {
		return s, err
	}
	// fields[i] is proc(5) field number i+3, at offs[i]; nFields counts
	// them all, the first maxStatFields are kept, in arrays on the stack:
	// a dump reads one stat file per thread, and bytes.Split's slices
	// were 40% of what a 1,000-thread dump allocated in this package.
	var fields [maxStatFields][]byte
	var offs [maxStatFields]int
	nFields := 0
	for o := off; ; nFields++ {
		f := rest
		i := bytes.IndexByte(rest, ' ')
		if i >= 0 {
			f = rest[:i]
		}
		if nFields < maxStatFields {
			fields[nFields], offs[nFields] = f, o
		}
		if i < 0 {
			nFields++
			break
		}
		rest, o = rest[i+1:], o+i+1
	}
	return statFields(s, fields[:min(nFields, maxStatFields)], offs[:], nFields, len(b))
}

// parseStatHead parses the pid and comm of a stat line (no trailing
// newline) into s, and returns
// the rest of the line (the fields from state on, single-space
// separated) and its offset in b.
func parseStatHead(b []byte) (s Stat, rest []byte, off int, err error) {
	s.Processor = -1
	open := bytes.IndexByte(b, '(')
	if open < 0 {
		return s, nil, 0, &StatError{Field: 2, Off: 0, Msg: "missing '(' before comm"}
	}
	closing := bytes.LastIndexByte(b, ')')
	if closing < open {
		return s, nil, 0, &StatError{Field: 2, Off: open, Msg: "missing ')' after comm"}
	}
	pidField := bytes.TrimRight(b[:open], " ")
	pid, perr := strconv.Atoi(string(pidField))
	if perr != nil || pid < 0 || len(pidField) == 0 || pidField[0] == '+' || pidField[0] == '-' {
		return s, nil, 0, &StatError{Field: 1, Off: 0, Msg: fmt.Sprintf("bad pid %q", pidField)}
	}
	s.PID = pid
	s.Comm = string(b[open+1 : closing])

	// Fields 3.. are single-space separated after ") ".
	rest, off = b[closing+1:], closing+1
	if len(rest) < 2 || rest[0] != ' ' {
		return s, nil, 0, &StatError{Field: 3, Off: off, Msg: "missing fields after comm"}
	}
	return s, rest[1:], off + 1, nil
}

// statFields decodes the fields after comm into s: fields[i] is proc(5)
// field i+3, at offs[i] of the line; nFields counts every field, kept or
// not; lineLen is the line's length, for the offset of a missing field.
func statFields(s Stat, fields [][]byte, offs []int, nFields, lineLen int) (Stat, error) {
	field := func(n int) ([]byte, int) { return fields[n-3], offs[n-3] }
	const minFields = 22 // up to starttime
	if nFields+2 < minFields {
		return s, &StatError{Field: nFields + 3, Off: lineLen, Msg: fmt.Sprintf("only %d fields, want at least %d", nFields+2, minFields)}
	}
	st, o := field(3)
	if len(st) != 1 || st[0] < 'A' || st[0] > 'z' {
		return s, &StatError{Field: 3, Off: o, Msg: fmt.Sprintf("bad state %q", st)}
	}
	s.State = st[0]
	num := func(n int, signed bool) (int64, uint64, error) {
		f, o := field(n)
		if signed {
			v, err := strconv.ParseInt(string(f), 10, 64)
			if err != nil || len(f) == 0 || f[0] == '+' {
				return 0, 0, &StatError{Field: n, Off: o, Msg: fmt.Sprintf("bad number %q", f)}
			}
			return v, 0, nil
		}
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil || len(f) == 0 || f[0] == '+' {
			return 0, 0, &StatError{Field: n, Off: o, Msg: fmt.Sprintf("bad number %q", f)}
		}
		return 0, v, nil
	}
	ppid, _, err := num(4, true)
	if err != nil {
		return s, err
	}
	s.PPID = int(ppid)
	if _, s.Flags, err = num(9, false); err != nil {
		return s, err
	}
	if _, s.UTime, err = num(14, false); err != nil {
		return s, err
	}
	if _, s.STime, err = num(15, false); err != nil {
		return s, err
	}
	if s.NumThreads, _, err = num(20, true); err != nil {
		return s, err
	}
	if _, s.StartTime, err = num(22, false); err != nil {
		return s, err
	}
	if nFields+2 >= 39 {
		p, _, err := num(39, true)
		if err != nil {
			return s, err
		}
		s.Processor = int(p)
	}
	return s, nil
}

// Schedstat is /proc/PID/task/TID/schedstat: time on CPU and waiting, in
// nanoseconds, and the number of timeslices run. It is finer than the tick
// counts of stat: a thread that ran for 100µs between two samples shows in
// RunNS and Timeslices but maybe not in UTime+STime.
type Schedstat struct {
	RunNS      uint64
	WaitNS     uint64
	Timeslices uint64
}

// ParseSchedstat parses "run_ns wait_ns timeslices\n".
func ParseSchedstat(b []byte) (Schedstat, error) {
	var s Schedstat
	f := bytes.Fields(b)
	if len(f) != 3 {
		return s, &StatError{Field: len(f) + 1, Off: len(b), Msg: fmt.Sprintf("schedstat has %d fields, want 3", len(f))}
	}
	dst := [3]*uint64{&s.RunNS, &s.WaitNS, &s.Timeslices}
	off := 0
	for i := range f {
		off = bytes.Index(b[off:], f[i]) + off
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil || f[i][0] == '+' {
			return s, &StatError{Field: i + 1, Off: off, Msg: fmt.Sprintf("bad schedstat number %q", f[i])}
		}
		*dst[i] = v
		off += len(f[i])
	}
	return s, nil
}

// ThreadInfo is one reading of a thread: its name, state and the CPU time it
// has used, both as clock ticks (stat) and nanoseconds (schedstat).
type ThreadInfo struct {
	TID   int
	Name  string // comm (at most 15 bytes; set by prctl(PR_SET_NAME) or pthread_setname_np)
	State byte
	// UTime and STime are clock ticks (sysconf(_SC_CLK_TCK), usually 100/s).
	UTime, STime uint64
	// Sched is valid when HasSched; kernels without CONFIG_SCHED_INFO lack
	// the file.
	Sched    Schedstat
	HasSched bool
}

// CPUTicks is UTime + STime.
func (t ThreadInfo) CPUTicks() uint64 { return t.UTime + t.STime }

// RanSince reports whether the thread used CPU since an earlier reading of
// the same thread: the schedstat counters when both readings have them, else
// the tick counts (which miss runs shorter than a tick).
func (t ThreadInfo) RanSince(prev ThreadInfo) bool {
	if t.HasSched && prev.HasSched {
		return t.Sched.RunNS != prev.Sched.RunNS || t.Sched.Timeslices != prev.Sched.Timeslices
	}
	return t.CPUTicks() != prev.CPUTicks()
}

// ReadThreadInfo reads /proc/PID/task/TID/stat and schedstat.
func ReadThreadInfo(pid, tid int) (ThreadInfo, error) {
	st, err := ReadStat(pid, tid)
	if err != nil {
		return ThreadInfo{}, err
	}
	ti := ThreadInfo{TID: tid, Name: st.Comm, State: st.State, UTime: st.UTime, STime: st.STime}
	if ss, err := readParsed(pid, tid, "schedstat", 128, ParseSchedstat); err == nil {
		ti.Sched, ti.HasSched = ss, true
	}
	return ti, nil
}

// ReadStat reads and parses /proc/PID/stat, or /proc/PID/task/TID/stat
// when tid is not 0, with plain system calls.
func ReadStat(pid, tid int) (Stat, error) {
	return readParsed(pid, tid, "stat", 1024, ParseStat)
}

// procBufs holds the buffers small /proc files are read into: an array on
// the stack escapes into the read system call, and a dump or a sampler's
// tick reads two or three files per thread (a 1,000-thread dump: 1 MB of
// garbage from stat alone).
var procBufs = sync.Pool{New: func() any { return new([8192]byte) }}

// readParsed reads /proc/PID/NAME, or /proc/PID/task/TID/NAME when tid is
// not 0, and parses it; a file longer than size bytes (at most 8192) is an
// error. parse must not keep the bytes it is given.
func readParsed[T any](pid, tid int, name string, size int, parse func([]byte) (T, error)) (T, error) {
	bp := procBufs.Get().(*[8192]byte)
	defer procBufs.Put(bp)
	buf := bp[:size]
	path := procPath(pid, name)
	if tid != 0 {
		path = procPath(pid, "task/"+strconv.Itoa(tid)+"/"+name)
	}
	var zero T
	b, err := readProcFile(path, buf)
	if err != nil {
		return zero, fmt.Errorf("procmaps: %w", err)
	}
	v, err := parse(b)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ReadThreadState returns the state letter of thread tid of pid (R, S, D,
// T, t, Z, ...) from /proc/PID/task/TID/stat: a tracer asks it before each
// wait that may sleep, and of threads slow to stop, while others are
// stopped. So it reads with raw system calls, which never enter Go's
// scheduler: through it, a system call can lose the thread its P (Go's
// sysmon takes the P of a thread in a system call for 20 µs), and the
// thread then waits to get one back, with the tracee threads it holds
// stopped, until another thread of the program gets a CPU to hand it one
// (2-9 ms under 4 spinning threads on 2 CPUs). Reading /proc/PID/stat
// does not block.
func ReadThreadState(pid, tid int) (byte, error) {
	bp := procBufs.Get().(*[8192]byte)
	defer procBufs.Put(bp)
	// The path, NUL-terminated, in the buffer's tail: no allocation (one
	// could start a garbage collection assist, another way into the
	// scheduler).
	path := append(bp[1024:1024], "/proc/"...)
	path = strconv.AppendInt(path, int64(pid), 10)
	path = append(path, "/task/"...)
	path = strconv.AppendInt(path, int64(tid), 10)
	path = append(path, "/stat\x00"...)
	b, err := readProcFileRaw(path, bp[:1024])
	if err != nil {
		return 0, fmt.Errorf("procmaps: %w", err)
	}
	st, err := ParseStat(b)
	if err != nil {
		return 0, fmt.Errorf("procmaps: %s: %w", path[:len(path)-1], err)
	}
	return st.State, nil
}

// readProcFileRaw reads the file at the NUL-terminated path into buf,
// with raw system calls: small /proc files never block, and through Go's
// scheduler a tracer's read can lose it its P (see ReadThreadState).
func readProcFileRaw(path, buf []byte) ([]byte, error) {
	name := func() string { return string(path[:len(path)-1]) } // for errors only
	cwd := unix.AT_FDCWD                                        // (absolute path: ignored)
	r, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(&path[0])), uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
	if e != 0 {
		return nil, &os.PathError{Op: "open", Path: name(), Err: e}
	}
	fd := int(r)
	defer unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
	n := 0
	for n < len(buf) {
		m, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return nil, &os.PathError{Op: "read", Path: name(), Err: e}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += int(m)
	}
	return nil, &os.PathError{Op: "read", Path: name(), Err: fmt.Errorf("longer than %d bytes", len(buf))}
}

// Status is the subset of /proc/PID/status (proc(5)) a tracer needs: who
// the process is, who traces it, whom it runs as and what is pending.
type Status struct {
	Tgid      int    // Tgid: the process a thread belongs to
	TracerPID int    // TracerPid: the tracing thread, 0 if none
	UIDs      [4]int // Uid: real, effective, saved and filesystem UID
	GIDs      [4]int // Gid: the same for groups; -1 where the line is missing
	SigPnd    uint64 // SigPnd: signals pending for this thread
	CapEff    uint64 // CapEff: effective capabilities
	// NSPID is the last field of NSpid: the PID in the process's own PID
	// namespace (a container's), 0 where the kernel prints no NSpid.
	NSPID int
}

// StatusError reports a malformed /proc/PID/status line: its key and the
// byte offset of the line.
type StatusError struct {
	Key string
	Off int
	Msg string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("procmaps: status %s at offset %d: %s", e.Key, e.Off, e.Msg)
}

// ParseStatus parses the contents of a /proc/PID/status file. Every key
// Status has must be present: the kernels stacktop supports all print
// them, so a missing one means the input is not a status file.
func ParseStatus(b []byte) (Status, error) {
	s := Status{UIDs: [4]int{-1, -1, -1, -1}, GIDs: [4]int{-1, -1, -1, -1}}
	const (
		seenTgid = 1 << iota
		seenTracer
		seenUID
		seenSigPnd
		seenCapEff
		seenAll = 1<<iota - 1
	)
	seen := 0
	for off := 0; off < len(b); {
		line := b[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		lineOff := off
		off += len(line) + 1
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		val = bytes.TrimSpace(val)
		bad := func(what string) error {
			return &StatusError{Key: string(key), Off: lineOff, Msg: fmt.Sprintf("bad %s %q", what, val)}
		}
		var err error
		switch string(key) {
		case "Tgid":
			if s.Tgid, err = parseDecimal(val); err != nil {
				return s, bad("number")
			}
			seen |= seenTgid
		case "TracerPid":
			if s.TracerPID, err = parseDecimal(val); err != nil {
				return s, bad("number")
			}
			seen |= seenTracer
		case "Uid":
			if s.UIDs, err = parseIDs(val); err != nil {
				return s, bad("UID list")
			}
			seen |= seenUID
		case "Gid": // optional: only the files opened for the target need it
			if s.GIDs, err = parseIDs(val); err != nil {
				return s, bad("GID list")
			}
		case "SigPnd":
			if s.SigPnd, err = strconv.ParseUint(string(val), 16, 64); err != nil {
				return s, bad("signal mask")
			}
			seen |= seenSigPnd
		case "NSpid": // optional: kernels before 4.1 lack it
			if f := bytes.Fields(val); len(f) > 0 {
				if s.NSPID, err = parseDecimal(f[len(f)-1]); err != nil {
					return s, bad("PID list")
				}
			}
		case "CapEff":
			if s.CapEff, err = strconv.ParseUint(string(val), 16, 64); err != nil {
				return s, bad("capability mask")
			}
			seen |= seenCapEff
		}
	}
	if seen != seenAll {
		missing := ""
		for i, k := range []string{"Tgid", "TracerPid", "Uid", "SigPnd", "CapEff"} {
			if seen&(1<<i) == 0 {
				missing = k
				break
			}
		}
		return s, &StatusError{Key: missing, Off: len(b), Msg: "missing"}
	}
	return s, nil
}

// parseDecimal parses a non-negative decimal number that fits an int.
func parseDecimal(b []byte) (int, error) {
	if len(b) == 0 || b[0] == '+' || b[0] == '-' {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseInt(string(b), 10, 0)
	return int(v), err
}

// parseIDs parses a status Uid or Gid value: real, effective, saved and
// filesystem IDs.
func parseIDs(val []byte) (ids [4]int, err error) {
	f := bytes.Fields(val)
	if len(f) != len(ids) {
		return ids, errors.New("not four IDs")
	}
	for i := range f {
		if ids[i], err = parseDecimal(f[i]); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// ReadStatus reads and parses /proc/PID/status, or /proc/PID/task/TID/status
// when tid is not 0.
func ReadStatus(pid, tid int) (Status, error) {
	return readParsed(pid, tid, "status", 8192, ParseStatus)
}

// ThreadWaitChannel returns the kernel function thread tid of pid sleeps
// in (/proc/PID/task/TID/wchan), or "" when it is not sleeping or the
// kernel hides it (without CAP_SYSLOG it reads "0").
func ThreadWaitChannel(pid, tid int) string {
	var buf [256]byte
	b, err := readProcFile(procPath(pid, "task/"+strconv.Itoa(tid)+"/wchan"), buf[:])
	if err != nil || string(b) == "0" {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readProcFile reads a small /proc file into buf with raw system calls.
// os.ReadFile costs an fstat, fcntl calls and an attempt to register the
// descriptor with the poller on every call; a sampler reading two files per
// thread per tick pays that thousands of times a second. A file longer
// than buf is an error: the /proc files read this way have bounded sizes.
func readProcFile(path string, buf []byte) ([]byte, error) {
	return readProcFileRaw(append([]byte(path), 0), buf)
}
