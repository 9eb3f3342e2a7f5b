package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// The tests below run the stacktop binary that TestMain (cli_test.go)
// builds into stacktopBin.

// record runs stacktop record with args and returns its exit code and
// stderr.
func record(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(stacktopBin, append([]string{"record"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("running stacktop: %v", err)
	return 0, ""
}

// splitCounts maps each recorded stack (outermost first, ';'-joined
// function names) to its count.
type splitCounts map[string]int64

// minSplitSamples is the fewest samples of the split chains a share is
// judged on; goodSplitSamples what a test that can record longer aims for.
const (
	minSplitSamples  = targets.SplitMinSamples
	goodSplitSamples = targets.SplitGoodSamples
)

// split returns the percentage of the split target's samples in a->hot and
// how many samples the two chains got.
func (c splitCounts) split() (share float64, n int64) {
	var hot, cold int64
	for stack, n := range c {
		switch {
		case strings.Contains(stack, "a;hot"):
			hot += n
		case strings.Contains(stack, "b;cold"):
			cold += n
		}
	}
	if hot+cold == 0 {
		return 0, 0
	}
	return 100 * float64(hot) / float64(hot+cold), hot + cold
}

// share is split for a test that needs enough samples.
func (c splitCounts) share(t *testing.T) float64 {
	t.Helper()
	share, n := c.split()
	if n < minSplitSamples {
		t.Fatalf("only %d samples in the split chains: %v", n, c)
	}
	return share
}

// checkShare fails t unless a->hot has split's 75% of the split chains'
// samples, within what their number explains (targets.SplitTolerance).
func (c splitCounts) checkShare(t *testing.T, what string) {
	t.Helper()
	share := c.share(t)
	_, n := c.split()
	tol := targets.SplitTolerance(n)
	t.Logf("%s: a->hot %.1f%% of %d samples (75 +- %.1f)", what, share, n, tol)
	if math.Abs(share-targets.SplitHotShare) > tol {
		t.Errorf("%s: a->hot has %.1f%% of %d samples, want 75 +- %.1f", what, share, n, tol)
	}
}

// TestRecordSplitBackends records the split target (75% a->hot, 25%
// b->cold by construction) once with each back end, into pprof, and
// checks:
//   - the share, read back by `go tool pprof`;
//   - every other format (folded, speedscope, SVG) that `stacktop
//     convert` writes of the same recording, each read back by a parser of
//     its own, carries the same share (the writers are the ones record
//     uses: one recording, four formats);
//   - the two back ends find the same stacks: every stack that holds at
//     least 5% of one back end's samples, outermost to innermost frame,
//     is among the other's. The two share the unwinders and differ in how
//     registers and stack bytes are taken (a ptrace stop, or the kernel's
//     copy at a timer tick).
func TestRecordSplitBackends(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	pid := strconv.Itoa(tg.PID())
	dir := t.TempDir()
	folded := map[string]splitCounts{}
	for _, backend := range []string{"ptrace", "perf"} {
		t.Run(backend, func(t *testing.T) {
			profile := filepath.Join(dir, backend+".pb.gz")
			// On a loaded machine the target gets less CPU, and an
			// on-CPU profile fewer samples: record longer until there
			// are enough.
			var recorded splitCounts
			for _, d := range []string{"2s", "5s", "12s"} {
				code, stderr := record(t, "-p", pid, "--backend", backend, "--rate", "499", "--duration", d, "-o", profile)
				if code != exitRecordOK {
					t.Fatalf("exit %d\n%s", code, stderr)
				}
				recorded = parsePprof(t, profile)
				if _, n := recorded.split(); n >= goodSplitSamples {
					break
				}
			}
			recorded.checkShare(t, "pprof")
			for _, tc := range []struct {
				file  string
				parse func(*testing.T, string) splitCounts
			}{
				{"p.folded", parseFolded},
				{"p.speedscope.json", parseSpeedscope},
				{"p.svg", parseSVG},
			} {
				path := filepath.Join(dir, backend+"-"+tc.file)
				if out, err := exec.Command(stacktopBin, "convert", profile, "-o", path).CombinedOutput(); err != nil {
					t.Fatalf("convert to %s: %v\n%s", tc.file, err, out)
				}
				c := tc.parse(t, path)
				c.checkShare(t, tc.file)
				if tc.file == "p.folded" {
					folded[backend] = c
				}
			}
		})
	}
	if len(folded) < 2 {
		return
	}
	// A sample in the vDSO's clock_gettime is at the same place as one in
	// its caller for this comparison; that the perf back end unwinds out
	// of the vDSO too is checked on its own below.
	const vdsoLeaf = ";clock_gettime;__vdso_clock_gettime"
	for _, pair := range [][2]string{{"ptrace", "perf"}, {"perf", "ptrace"}} {
		c, other := folded[pair[0]], folded[pair[1]]
		otherPlaces := map[string]bool{}
		for stack := range other {
			otherPlaces[strings.TrimSuffix(stack, vdsoLeaf)] = true
		}
		var total int64
		for _, n := range c {
			total += n
		}
		for stack, n := range c {
			if place := strings.TrimSuffix(stack, vdsoLeaf); 20*n >= total && !otherPlaces[place] {
				t.Errorf("%s's stack %q (%d of %d samples) is not among %s's", pair[0], place, n, total, pair[1])
			}
		}
	}
	var vdso int64
	for stack, n := range folded["perf"] {
		if strings.HasSuffix(stack, "main;a;hot"+vdsoLeaf) || strings.HasSuffix(stack, "main;b;cold"+vdsoLeaf) {
			vdso += n
		}
	}
	if vdso == 0 {
		t.Errorf("no perf sample unwound out of the vDSO's clock_gettime to a or b")
	}
}

func parseFolded(t *testing.T, path string) splitCounts {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := splitCounts{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("bad folded line %q", line)
		}
		c[line[:i]] += n
	}
	return c
}

// parsePprof reads the profile with `go tool pprof -top`: the cumulative
// sample count of hot and of cold is that of their chains (each is called
// only from a, respectively b).
func parsePprof(t *testing.T, path string) splitCounts {
	out, err := exec.Command("go", "tool", "pprof", "-sample_index=0", "-top", "-nodecount=1000", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	// flat flat% sum% cum cum% name
	row := regexp.MustCompile(`^\s*(\d+)\s+\S+%\s+\S+%\s+(\d+)\s+\S+%\s+(\S+)`)
	c := splitCounts{}
	for _, line := range strings.Split(string(out), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cum, _ := strconv.ParseInt(m[2], 10, 64)
		switch m[3] {
		case "hot":
			c["a;hot"] += cum
		case "cold":
			c["b;cold"] += cum
		}
	}
	return c
}

func parseSpeedscope(t *testing.T, path string) splitCounts {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Shared struct {
			Frames []struct {
				Name string `json:"name"`
			} `json:"frames"`
		} `json:"shared"`
		Profiles []struct {
			Type    string    `json:"type"`
			Samples [][]int   `json:"samples"`
			Weights []float64 `json:"weights"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// Weights are nanoseconds (samples x period): the smallest is one
	// period, so dividing by it counts samples again.
	unit := 0.0
	for _, p := range doc.Profiles {
		for _, w := range p.Weights {
			if w > 0 && (unit == 0 || w < unit) {
				unit = w
			}
		}
	}
	c := splitCounts{}
	for _, p := range doc.Profiles {
		for i, s := range p.Samples {
			var names []string
			for _, fi := range s { // speedscope stacks are outermost first
				names = append(names, doc.Shared.Frames[fi].Name)
			}
			w := int64(1)
			if i < len(p.Weights) && unit > 0 {
				w = int64(p.Weights[i]/unit + 0.5)
			}
			c[strings.Join(names, ";")] += w
		}
	}
	return c
}

// parseSVG reads the flame graph: each frame is a <g data-n="SAMPLES">
// with a <title> of "NAME (AMOUNT, P%)"; the samples of hot and cold are
// those of their boxes (one box per chain in this target).
func parseSVG(t *testing.T, path string) splitCounts {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	c := splitCounts{}
	title := regexp.MustCompile(`^(\S+) \(`)
	inTitle := false
	var n int64 // the samples of the frame whose <g> is open
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inTitle = tok.Name.Local == "title"
			if tok.Name.Local == "g" {
				for _, a := range tok.Attr {
					if a.Name.Local == "data-n" {
						n, _ = strconv.ParseInt(a.Value, 10, 64)
					}
				}
			}
		case xml.EndElement:
			inTitle = false
		case xml.CharData:
			if !inTitle {
				continue
			}
			m := title.FindStringSubmatch(string(tok))
			if m == nil {
				continue
			}
			switch m[1] {
			case "hot":
				c["a;hot"] += n
			case "cold":
				c["b;cold"] += n
			}
		}
	}
	return c
}

// TestRecordCommand: `record -- CMD` samples CMD from its start and exits
// with CMD's status.
func TestRecordCommand(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "cmd.folded")
	code, stderr := record(t, "--rate", "499", "-o", out, "--", targets.Path("split-sframe3"), "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	counts := parseFolded(t, out)
	counts.checkShare(t, "record -- split")
	// Sampled from its first instruction, before the C library was
	// mapped: its stacks in and below main still reach _start.
	for stack, n := range counts {
		if strings.HasPrefix(stack, "main;") || strings.Contains(stack, ";main;") || strings.Contains(stack, "clock_gettime") {
			if !strings.HasPrefix(stack, "_start;") {
				t.Errorf("%d samples of a stack cut short: %s", n, stack)
			}
		}
	}

	for _, want := range []int{0, 3, 77} {
		code, stderr := record(t, "-o", filepath.Join(dir, "x.folded"), "--", "/bin/sh", "-c", "exit "+strconv.Itoa(want))
		if code != want {
			t.Errorf("sh -c 'exit %d': stacktop exited %d\n%s", want, code, stderr)
		}
	}
	code, stderr = record(t, "-o", filepath.Join(dir, "k.folded"), "--", "/bin/sh", "-c", "kill -9 $$")
	if code != 128+9 {
		t.Errorf("killed command: stacktop exited %d, want 137\n%s", code, stderr)
	}
	code, _ = record(t, "-o", filepath.Join(dir, "n.folded"), "--", filepath.Join(dir, "no-such-program"))
	if code != 127 {
		t.Errorf("missing command: stacktop exited %d, want 127", code)
	}
}

// TestRecordDurationEndsCommand: with --duration, `record -- CMD` ends the
// command when the recording ends (SIGTERM, SIGKILL if it ignores that),
// writes the profile and exits 0; the command is not left running. A
// command that ignores SIGTERM and spins, and one that sleeps.
func TestRecordDurationEndsCommand(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		script string
		says   string
	}{
		{"sleeps", `exec sleep 30`, "SIGTERM"},
		{"ignores SIGTERM", `trap "" TERM; while :; do :; done`, "SIGKILL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "d.folded")
			mark := "stacktop-duration-" + strconv.Itoa(os.Getpid())
			start := time.Now()
			code, stderr := record(t, "--duration", "1s", "-o", out, "--", "/bin/sh", "-c", c.script, mark)
			took := time.Since(start)
			if code != exitRecordOK {
				t.Errorf("exit %d, want 0\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "ended at the end of --duration") || !strings.Contains(stderr, c.says) {
				t.Errorf("the summary does not say the command was ended (%s):\n%s", c.says, stderr)
			}
			if _, err := os.Stat(out); err != nil {
				t.Errorf("no profile: %v", err)
			}
			// Not a timing assertion: a command left to run its 30 s (or
			// forever) is what this catches.
			if took > 20*time.Second {
				t.Errorf("record --duration 1s took %v", took)
			}
			if pids := pgrep(t, mark); len(pids) > 0 {
				t.Errorf("the command still runs: %v", pids)
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			t.Logf("took %v", took)
		})
	}
}

// pgrep lists the processes whose command line holds s.
func pgrep(t *testing.T, s string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestRecordForkExecChurn: a command that forks and execs hundreds of
// programs and runs threads that come and go; the recording survives and
// the command's status comes back.
func TestRecordForkExecChurn(t *testing.T) {
	t.Parallel()
	needRoot(t)
	out := filepath.Join(t.TempDir(), "churn.folded")
	// The traced shell forks and execs 200 programs, then execs exiter,
	// which churns threads for 1.5 s and exits 0.
	script := `i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done; exec "$0" churn 1500`
	code, stderr := record(t, "--rate", "999", "--threads", "-o", out, "--", "/bin/sh", "-c", script, targets.Path("exiter-sframe3"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// By thread name (--threads' root frame), not by function: most of a
	// creator's CPU time is thread creation, at clone3's exit, where
	// glibc has no CFI (its FDE ends before the system call, for the
	// child's sake), so those walks end at clone3.
	churned := false
	for stack := range parseFolded(t, out) {
		churned = churned || strings.HasPrefix(stack, "ex-creator ") || strings.HasPrefix(stack, "ex-churn ")
	}
	if !churned {
		t.Errorf("no stack of exiter's threads after the exec\n%s", stderr)
	}
	t.Log(stderr)
}

// TestRecordInterrupt: SIGINT in the middle of a recording stops it and
// still writes a valid file; the target runs on.
func TestRecordInterrupt(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	out := filepath.Join(t.TempDir(), "int.pb.gz")
	cmd := exec.Command(stacktopBin, "record", "-p", strconv.Itoa(tg.PID()), "--rate", "499", "-o", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// On-CPU samples count CPU time: interrupt once the target used enough
	// of it for goodSplitSamples (at 499 Hz, 2 ms each), at most after 20 s.
	cpu0 := processCPU(t, tg.PID())
	time.Sleep(1500 * time.Millisecond)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if processCPU(t, tg.PID())-cpu0 >= goodSplitSamples*2*time.Millisecond {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stacktop: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("stacktop did not end after SIGINT\n%s", stderr.String())
	}
	// The file is written, the target detached, and the split is what a
	// full run reads: an interrupted recording reads 75 like the others
	// (it read 69% in two of five CI runs when a sample's weight was its
	// thread's CPU time charged at whatever stack the tick found).
	parsePprof(t, out).checkShare(t, "interrupted record")
	if !tg.MakesProgress(5 * time.Second) {
		t.Errorf("target stuck after the recording")
	}
}

// TestRecordTargetExits: the recording of a process that exits ends by
// itself and is written.
func TestRecordTargetExits(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "exiter-sframe3", "exit", "800")
	out := filepath.Join(t.TempDir(), "exit.folded")
	code, stderr := record(t, "-p", strconv.Itoa(tg.PID()), "-o", out)
	if code != exitRecordOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "the process exited") {
		t.Errorf("summary does not say the process exited:\n%s", stderr)
	}
	found := false
	for stack := range parseFolded(t, out) {
		found = found || strings.Contains(stack, "ex_spin_leaf")
	}
	if !found {
		t.Error("no stack in ex_spin_leaf")
	}
}

// TestRecordUsage: bad invocations are usage errors and write nothing.
func TestRecordUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"-p", "1", "--", "true"},
		{"-p", "1", "--rate", "0"},
		{"-p", "1", "--rate", "1e-300"},
		{"-p", "1", "--rate", "0.5"},
		{"-p", "1", "--otlp", "http://"},
		{"-p", "1", "--otlp", "localhost"},
		{"-p", "1", "--otlp", "localhost:99999"},
		{"-p", "1", "--pyroscope", "http://:4040"},
		{"-p", "1", "--pyroscope", "http://[::1"},
		{"-p", "1", "--format", "nope"},
		{"-p", "1", "--tid", "x"},
	} {
		if code, _ := record(t, args...); code != exitUsage {
			t.Errorf("record %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// processCPU is the CPU time process pid used so far (utime + stime).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		t.Fatalf("short stat: %q", b)
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ 100
}
