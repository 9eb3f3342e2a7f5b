// Package early raises the main thread's priority before the program's
// packages initialise, for a dump.
//
// A dump of a process whose threads keep the CPUs busy (4 spinning
// threads on 2 CPUs, bench/dump-1000.sh) spent 4-22 ms from exec to main,
// and up to 13 ms more before runDump raised its priority: the Go runtime
// and about 180 packages initialise in 3 ms of CPU, but at the user's
// nice value, shared as equals with every spinning thread. This package
// imports only syscall, and its path sorts before strconv, strings, sync
// and time, which nearly every other package waits for: Go initialises
// the first package (by import path) whose imports are done, so this
// init runs before fmt, regexp, net/http and every dependency of note
// (TestEarlyInitRunsFirst checks the order on the built binary).
//
// It also gives Go the dump's one P more than CPUs (package selfsched
// says why), unless GOMAXPROCS is set: runtime.GOMAXPROCS stops the world
// and first waits for a garbage collection under way, which under such
// load took up to 26 ms when main asked for it; here no collection has
// started yet.
//
// The command is not known yet (package os has not run: os.Args is not
// set), so the priority is raised for every command, and main calls
// selfsched.Settle at once, which gives every thread its first nice value
// and Go its first number of Ps back unless the command is dump. Without
// the permission (CAP_SYS_NICE, RLIMIT_NICE) the priority stays.
package early

import (
	"runtime"
	"syscall"
)

// Nice is the nice value init asks for, a dump's: the tracer thread's
// (ptrace's tracerNice), so that no part of the pipeline waits for
// another.
const Nice = -10

var (
	prevNice int  // the main thread's nice value before init
	raised   bool // init raised it
	procsSet bool // init set GOMAXPROCS
)

func init() {
	raise()
	if v, _ := syscall.Getenv("GOMAXPROCS"); v == "" {
		runtime.GOMAXPROCS(runtime.NumCPU() + 1)
		procsSet = true
	}
}

// raise raises the main thread's priority to Nice, and the runtime's
// other threads with it: GOMAXPROCS stops the world, which waits for
// each of them to get a CPU. (Left at the user's nice value under 4
// spinning threads on 2 CPUs, 7 starts in 30 waited 2-23 ms here; raised,
// none waited over 1.2 ms.)
func raise() {
	cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return
	}
	nice := 20 - cur // the system call returns 20 - nice
	if nice <= Nice {
		return // already at least as high
	}
	if syscall.Setpriority(syscall.PRIO_PROCESS, 0, Nice) != nil { // this thread only, on Linux
		return
	}
	prevNice, raised = nice, true
	for _, tid := range otherThreads() {
		syscall.Setpriority(syscall.PRIO_PROCESS, tid, Nice)
	}
}

// otherThreads lists this process's threads but the calling one. It reads
// /proc/self/task itself, with package syscall alone: importing procmaps,
// which every other reader of /proc goes through, would make this package
// initialise after most others. The runtime has started a handful of
// threads by now; one read holds them.
func otherThreads() []int {
	fd, err := syscall.Open("/proc/self/task", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var buf [4096]byte
	n, err := syscall.ReadDirent(fd, buf[:])
	if err != nil || n <= 0 {
		return nil
	}
	_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
	self := syscall.Gettid()
	var tids []int
	for _, name := range names {
		tid := 0
		for _, c := range name {
			if c < '0' || c > '9' || tid > 1<<30 {
				tid = 0
				break
			}
			tid = tid*10 + int(c-'0')
		}
		if tid > 0 && tid != self {
			tids = append(tids, tid)
		}
	}
	return tids
}

// Raised reports whether init raised the main thread's priority, and its
// nice value before.
func Raised() (prev int, ok bool) { return prevNice, raised }

// ProcsSet reports whether init set GOMAXPROCS.
func ProcsSet() bool { return procsSet }
