// Command threadnames runs three OS threads named hot, warm and waker
// (their comm, as ps -L and /proc/PID/task/TID/comm show it), for tests of
// per-thread output (record --threads) and selection by name
// (--thread-name).
//
//	hot    spins all the time in hotLoop
//	warm   spins about half the time in warmLoop, sleeps the rest
//	waker  wakes every millisecond in wakerLoop, spinning briefly
//
// It prints "ready" once the three are named, and exits after SECONDS (its
// only argument) if given. It is built by the tests that use it (go build
// of this package: it needs nothing but the Go toolchain).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var sink uint64

//go:noinline
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 10000; i++ {
			sink++
		}
	}
}

//go:noinline
func hotLoop() {
	for {
		spin(10 * time.Millisecond)
	}
}

//go:noinline
func warmLoop() {
	for {
		spin(5 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
}

//go:noinline
func wakerLoop() {
	for {
		spin(200 * time.Microsecond)
		time.Sleep(time.Millisecond)
	}
}

func init() {
	// Keep the main goroutine on the main thread, so no named loop takes
	// it and renames the process.
	runtime.LockOSThread()
}

func main() {
	var named sync.WaitGroup
	for _, t := range []struct {
		name string
		loop func()
	}{{"hot", hotLoop}, {"warm", warmLoop}, {"waker", wakerLoop}} {
		named.Add(1)
		go func() {
			// The goroutine keeps this OS thread for good, so the
			// thread's name stays with its loop.
			runtime.LockOSThread()
			name, _ := unix.BytePtrFromString(t.name)
			err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
			runtime.KeepAlive(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "threadnames:", err)
				os.Exit(1)
			}
			named.Done()
			t.loop()
		}()
	}
	named.Wait()
	fmt.Println("ready")
	if len(os.Args) > 1 {
		s, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: threadnames [SECONDS]")
			os.Exit(2)
		}
		time.Sleep(time.Duration(s * float64(time.Second)))
		os.Exit(0)
	}
	select {}
}
