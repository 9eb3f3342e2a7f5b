package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestTopAgreesWithRecord: top's threads view (cumulative) and record give
// each thread of cpusplit (100%, 25%, 5%, ~0% of a CPU) its share of the
// CPU time the process used meanwhile (schedstat, read around each run),
// within 3 points: so top draws what record writes. Each is compared with
// its own run's truth, not with the other's figures: the two cannot run at
// once (one tracer per process), and on a VM whose host takes CPU away the
// split itself moves from one run to the next (hot got 52% of the
// process's CPU in one run, 63% in another).
func TestTopAgreesWithRecord(t *testing.T) {
	needRoot(t)
	needTmux(t)
	tg := targets.Start(t, "cpusplit-fp")
	threads := []string{"hot", "quarter", "fifth", "waker"}

	truthTop := startTruth(t, tg.PID())
	term := startTmux(t, "topshares", 100, 30,
		fmt.Sprintf("%s top --cumulative --rate 199 -p %d; echo top-exited-$?; sleep 30", stacktopBin, tg.PID()))
	term.keys("3")
	row := regexp.MustCompile(`([0-9.]+)%\s+(?:\d+\s+)?(hot|quarter|fifth|waker)\b`)
	var top map[string]float64
	var n int
	screen := term.waitFor("the threads with 800 samples", 60*time.Second, func(s string) bool {
		top = map[string]float64{}
		for _, m := range row.FindAllStringSubmatch(s, -1) {
			top[m[2]], _ = strconv.ParseFloat(m[1], 64)
		}
		n = samplesShown(s)
		return n >= 800 && len(top) >= 3
	})
	truthTop.end()
	term.keys("q")
	term.waitFor("top to exit", 20*time.Second, func(s string) bool { return strings.Contains(s, "top-exited-") })

	out := filepath.Join(t.TempDir(), "threads.folded")
	truthRec := startTruth(t, tg.PID())
	code, stderr := record(t, "-p", strconv.Itoa(tg.PID()), "--rate", "199", "--duration", "4s", "--threads", "-o", out)
	truthRec.end()
	if code != exitRecordOK {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	rec := map[string]float64{}
	var total float64
	for stack, c := range parseFolded(t, out) {
		name, _, _ := strings.Cut(stack, " ")
		rec[name] += float64(c)
		total += float64(c)
	}
	for name := range rec {
		rec[name] *= 100 / total
	}
	for _, name := range threads {
		t.Logf("%-8s top %5.1f%% (truth %5.1f%%)  record %5.1f%% (truth %5.1f%%)", name,
			top[name], truthTop.share[name], rec[name], truthRec.share[name])
		if d := top[name] - truthTop.share[name]; math.Abs(d) > 3 {
			t.Errorf("%s: top shows %.1f%%, the thread used %.1f%% of the process's CPU", name, top[name], truthTop.share[name])
		}
		if d := rec[name] - truthRec.share[name]; math.Abs(d) > 3 {
			t.Errorf("%s: record wrote %.1f%%, the thread used %.1f%% of the process's CPU", name, rec[name], truthRec.share[name])
		}
	}
	if t.Failed() {
		t.Logf("top's screen (%d samples):\n%s", n, screen)
	}
}

// truth is each thread's share of the CPU time its process used between
// startTruth and end, by thread name, from schedstat.
type truth struct {
	t     *testing.T
	pid   int
	start map[string]uint64
	share map[string]float64
}

func startTruth(t *testing.T, pid int) *truth {
	return &truth{t: t, pid: pid, start: runTimes(t, pid)}
}

func (tr *truth) end() {
	now := runTimes(tr.t, tr.pid)
	var total float64
	tr.share = map[string]float64{}
	for name, ns := range now {
		d := float64(ns - tr.start[name])
		tr.share[name] = d
		total += d
	}
	for name := range tr.share {
		tr.share[name] *= 100 / total
	}
}

// runTimes sums schedstat's run time of pid's threads by name.
func runTimes(t *testing.T, pid int) map[string]uint64 {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, e := range ents {
		comm, err1 := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
		ss, err2 := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err1 != nil || err2 != nil {
			continue
		}
		f := strings.Fields(string(ss))
		if len(f) == 0 {
			continue
		}
		ns, _ := strconv.ParseUint(f[0], 10, 64)
		out[strings.TrimSpace(string(comm))] += ns
	}
	return out
}
