package procmaps

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// TestThreadsSeveralGetdents: a task directory larger than the pooled
// 64 KiB buffer (over 2,048 records of 32 bytes) takes more than one
// getdents64 call; Threads must list every thread, also when several
// goroutines share the buffer pool at once.
func TestThreadsSeveralGetdents(t *testing.T) {
	const n = 2600 // 2,600 * 32 bytes = 83 KB: two calls at least
	var want []int // the threads that stay put (the runtime may add its own)
	for range n {
		want = append(want, lockedThread(t, func(stop <-chan struct{}) { <-stop }))
	}
	want = append(want, os.Getpid())
	slices.Sort(want)
	pid := os.Getpid()
	if ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task"); err != nil || len(ents) < n {
		t.Fatalf("os.ReadDir: %d, %v", len(ents), err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				got, err := Threads(pid)
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
					t.Errorf("goroutine %d: not sorted or duplicates", g)
				}
				for _, tid := range want {
					if _, found := slices.BinarySearch(got, tid); !found {
						t.Errorf("goroutine %d: thread %d missing from %d TIDs", g, tid, len(got))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
