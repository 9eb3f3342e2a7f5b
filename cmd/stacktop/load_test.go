package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

var (
	truncatedLine = regexp.MustCompile(`truncated stacks: (\d+) \(([\d.]+)%\)`)
	methodsLine   = regexp.MustCompile(`frames by unwind method: (.*)`)
	samplesLine   = regexp.MustCompile(`stacktop: (\d+) samples`)
)

// recordSummary records pid for d and returns the summary's sample count,
// truncated stacks and unwind methods (name -> share of frames).
func recordSummary(t *testing.T, pid int, d string) (samples, truncated int, methods map[string]float64) {
	t.Helper()
	code, stderr := record(t, "-p", strconv.Itoa(pid), "--duration", d, "-o", filepath.Join(t.TempDir(), "p.folded"))
	if code != 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	m := samplesLine.FindStringSubmatch(stderr)
	tr := truncatedLine.FindStringSubmatch(stderr)
	ml := methodsLine.FindStringSubmatch(stderr)
	if m == nil || tr == nil || ml == nil {
		t.Fatalf("no summary:\n%s", stderr)
	}
	samples, _ = strconv.Atoi(m[1])
	truncated, _ = strconv.Atoi(tr[1])
	methods = map[string]float64{}
	for _, part := range strings.Split(ml[1], ", ") {
		name, pct, _ := strings.Cut(part, " ")
		methods[name], _ = strconv.ParseFloat(strings.TrimSuffix(pct, "%"), 64)
	}
	return samples, truncated, methods
}

// TestRecordUnderLoad: stacks do not depend on the machine's load. The
// split fixture recorded with 20 spinners a CPU beside it has no truncated
// stack, as on the quiet machine, and its frames come from the same
// unwinders (SFrame, CFI and frame 0's registers) in like shares.
func TestRecordUnderLoad(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	_, quietTrunc, quiet := recordSummary(t, tg.PID(), "2s")
	if quietTrunc != 0 {
		t.Fatalf("%d truncated stacks on the quiet machine", quietTrunc)
	}

	for range 20 * runtime.NumCPU() {
		spin := exec.Command("sh", "-c", "while :; do :; done")
		spin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	}
	samples, trunc, loaded := recordSummary(t, tg.PID(), "4s")
	t.Logf("quiet %v; loaded (%d samples) %v", quiet, samples, loaded)
	if samples < 5 {
		t.Skipf("only %d samples under load: too few to compare", samples)
	}
	if trunc != 0 {
		t.Errorf("%d of %d stacks truncated under load, none on the quiet machine", trunc, samples)
	}
	for name, share := range quiet {
		if name == "regs" {
			continue // frame 0: its share follows the stacks' depth
		}
		if loaded[name] == 0 && share > 10 {
			t.Errorf("no %s frames under load (%.1f%% on the quiet machine)", name, share)
		}
	}
	for name := range loaded {
		if _, ok := quiet[name]; !ok {
			t.Errorf("%s frames under load, none on the quiet machine: %v", name, loaded)
		}
	}
}
