// Command goprog is stacktop's Go test target: Go code has no .eh_frame
// and no SFrame, but keeps frame pointers and a .gopclntab, so an unwinder
// walks it by frame pointers and names it from the pclntab.
//
// One goroutine, locked to its own thread named "gospin", spins in
// spinLeaf <- spinMiddle <- spinOuter <- main.main.func1; another,
// locked to "goblock", blocks in a channel receive in blockHere (inside
// the Go scheduler: runtime.futex and friends). The other threads are the
// runtime's own (sysmon, idle Ms).
//
// Prints "ready" once both run, then publishes a progress counter every
// 10 ms in the file STACKTOP_PROGRESS names (see ../target.h).
//
// With the argument "systemstack", after "ready" a third goroutine, locked
// to the thread "gosys", writes a heap dump (runtime/debug.WriteHeapDump)
// to a one-page pipe nobody reads: the runtime stops the world and writes
// from its system stack, inside runtime.systemstack, and the write blocks
// there for good. That thread's goroutine frames (dumpHeap, main.main's
// closure, runtime.goexit) are only reachable through g.m.curg.sched. The
// world stays stopped, so the progress counter stops too.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var sink atomic.Uint64

//go:noinline
func spinLeaf(n uint64) uint64 {
	for i := uint64(0); i < 1000; i++ {
		n = n*6364136223846793005 + i
	}
	return n
}

//go:noinline
func spinMiddle(n uint64) {
	for {
		n = spinLeaf(n)
		sink.Store(n)
	}
}

//go:noinline
func spinOuter() { spinMiddle(1) }

//go:noinline
func blockHere(c chan int) int { return <-c }

// heap keeps enough live objects that a heap dump overflows a pipe's page.
var heap [][]byte

//go:noinline
func dumpHeap(fd uintptr) { debug.WriteHeapDump(fd) }

// setThreadName names the calling thread (prctl PR_SET_NAME), so a test
// finds it by its comm.
func setThreadName(name string) {
	const prSetName = 15
	b := append([]byte(name), 0)
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetName, uintptr(unsafe.Pointer(&b[0])), 0)
	runtime.KeepAlive(b)
}

func main() {
	started := make(chan struct{}, 2)
	go func() {
		runtime.LockOSThread()
		setThreadName("gospin")
		started <- struct{}{}
		spinOuter()
	}()
	never := make(chan int)
	go func() {
		runtime.LockOSThread()
		setThreadName("goblock")
		started <- struct{}{}
		blockHere(never)
	}()
	<-started
	<-started
	time.Sleep(50 * time.Millisecond)
	path := os.Getenv("STACKTOP_PROGRESS")
	publish := func(v uint64) {
		if path == "" {
			return
		}
		if os.WriteFile(path+".tmp", []byte(strconv.FormatUint(v, 10)+"\n"), 0o644) == nil {
			os.Rename(path+".tmp", path)
		}
	}
	publish(0)
	if len(os.Args) > 1 && os.Args[1] == "systemstack" {
		for i := 0; i < 4096; i++ {
			heap = append(heap, make([]byte, 64))
		}
		var p [2]int
		if err := syscall.Pipe(p[:]); err != nil {
			fmt.Println("pipe:", err)
			os.Exit(1)
		}
		const fSetPipeSz = 1031
		syscall.Syscall(syscall.SYS_FCNTL, uintptr(p[1]), fSetPipeSz, 4096)
		fmt.Println("ready")
		go func() {
			runtime.LockOSThread()
			setThreadName("gosys")
			dumpHeap(uintptr(p[1]))
		}()
		select {}
	}
	fmt.Println("ready")
	for i := uint64(1); ; i++ {
		time.Sleep(10 * time.Millisecond)
		publish(i)
	}
}
