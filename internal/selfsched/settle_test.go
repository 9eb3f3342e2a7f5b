package selfsched

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// TestSettleKeepsGOMAXPROCSDefault: for the commands Settle settles, Go's
// number of Ps is left as the runtime manages it by default (since Go
// 1.25 it follows the CPUs the process may use and its cgroup's limit),
// as it was before package early set it: a command whose affinity drops
// to one CPU ends up with one P.
func TestSettleKeepsGOMAXPROCSDefault(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.NumCPU() < 2 {
		t.Skip("needs the default GOMAXPROCS and 2 CPUs")
	}
	Settle(false)
	var one, all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	one.Set(0)
	setAll := func(s *unix.CPUSet) {
		tids, err := procmaps.Threads(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			unix.SchedSetaffinity(tid, s)
		}
	}
	setAll(&one)
	defer setAll(&all)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.GOMAXPROCS(0) != 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS %d after the affinity dropped to one CPU: the runtime no longer updates it (Settle called runtime.GOMAXPROCS; runtime.SetDefaultGOMAXPROCS restores the default)", n)
	}
}
