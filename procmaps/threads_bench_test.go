package procmaps

import (
	"os"
	"runtime"
	"testing"
)

// BenchmarkThreads lists the task directory of a process of 1,000
// threads (this one: the benchmark starts them), as a dump does.
func BenchmarkThreads(b *testing.B) {
	stop := make(chan struct{})
	defer close(stop)
	started := make(chan struct{})
	const n = 1000
	for range n {
		go func() {
			runtime.LockOSThread() // a thread of its own, ended with the goroutine
			started <- struct{}{}
			<-stop
		}()
	}
	for range n {
		<-started
	}
	pid := os.Getpid()
	b.ResetTimer()
	for b.Loop() {
		tids, err := Threads(pid)
		if err != nil || len(tids) < n {
			b.Fatalf("%d threads, %v", len(tids), err)
		}
	}
}
