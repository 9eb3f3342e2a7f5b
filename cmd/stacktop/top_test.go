package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestTopInTmux runs `stacktop top` on a fixture whose time split is known
// (75% in a->hot, 25% in b->cold) inside a real terminal (tmux), reads the
// screen, presses keys, quits, and checks the target runs on untraced.
func TestTopInTmux(t *testing.T) {
	t.Parallel()
	needRoot(t)
	needTmux(t)
	tg := targets.Start(t, "split-sframe3")
	term := startTmux(t, "top", 80, 24, fmt.Sprintf("%s top -p %d; echo top-exited-$?; sleep 30", stacktopBin, tg.PID()))
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		return term.waitFor(what, 20*time.Second, ok)
	}

	// The functions view: hot's total share must be plausible (75% by
	// construction; its self share is lower, because the target reads its
	// CPU clock inside hot and some samples land in the vDSO).
	hotLine := regexp.MustCompile(`(?m)^.*?([0-9.]+)%.*\bhot\b`)
	s := waitFor("the hot function with enough samples", func(s string) bool {
		return hotLine.MatchString(s) && samplesShown(s) >= 150
	})
	for _, line := range strings.Split(s, "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("line wider than the terminal (%d): %q", n, line)
		}
	}
	share := totalPercent(t, hotLine.FindString(s))
	if share < 60 || share > 90 {
		t.Errorf("hot's total %.1f%%, want about 75%%:\n%s", share, s)
	}

	// A key switches to the call tree, whose hottest path main > a > hot
	// is open by default.
	term.keys("2")
	s = waitFor("the call tree", func(s string) bool { return strings.Contains(s, "CALLER > CALLEE") })
	for _, fn := range []string{"▾ main", "▾ a", "hot"} {
		if !strings.Contains(s, fn) {
			t.Errorf("tree view lacks %q:\n%s", fn, s)
		}
	}

	// q quits; once stacktop has exited (the UI leaves the alternate
	// screen before the target is detached), the target must be running
	// and untraced.
	term.keys("q")
	s = waitFor("stacktop to exit", func(s string) bool { return strings.Contains(s, "top-exited-") })
	if !strings.Contains(s, "top-exited-0") {
		t.Errorf("stacktop top did not exit with status 0:\n%s", s)
	}
	checkUntraced(t, tg.PID())
	if !tg.MakesProgress(5 * time.Second) {
		t.Errorf("target stopped making progress after top quit")
	}
}

var samplesRe = regexp.MustCompile(`samples[: ]+([0-9]+)|([0-9]+) samples`)

// samplesShown reads the sample count from the header.
func samplesShown(s string) int {
	m := samplesRe.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1] + m[2])
	return n
}

// totalPercent reads the functions view's second column (SELF%, TOTAL%).
func totalPercent(t *testing.T, line string) float64 {
	t.Helper()
	m := regexp.MustCompile(`([0-9.]+)%\s+([0-9.]+)%`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no SELF%% TOTAL%% columns in %q", line)
	}
	v, _ := strconv.ParseFloat(m[2], 64)
	return v
}

func checkUntraced(t *testing.T, pid int) {
	t.Helper()
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if len(tasks) == 0 {
		t.Fatalf("target %d is gone", pid)
	}
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if !bytes.Contains(b, []byte("\nTracerPid:\t0\n")) {
			t.Errorf("thread %s still traced", task.Name())
		}
		if bytes.Contains(b, []byte("\nState:\tT")) || bytes.Contains(b, []byte("\nState:\tt")) {
			t.Errorf("thread %s left stopped", task.Name())
		}
	}
}
