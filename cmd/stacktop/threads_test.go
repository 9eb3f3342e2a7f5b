package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

var (
	threadnamesOnce sync.Once
	threadnamesPath string
	threadnamesErr  error
)

// threadnames builds testdata/targets/threadnames (threads named hot, warm
// and waker) once per test binary.
func threadnames(t *testing.T) string {
	t.Helper()
	threadnamesOnce.Do(func() {
		threadnamesPath = filepath.Join(filepath.Dir(stacktopBin), "threadnames")
		out, err := exec.Command("go", "build", "-o", threadnamesPath, "../../testdata/targets/threadnames").CombinedOutput()
		if err != nil {
			threadnamesErr = err
			t.Logf("%s", out)
		}
	})
	if threadnamesErr != nil {
		t.Fatalf("building threadnames: %v", threadnamesErr)
	}
	return threadnamesPath
}

func startThreadnames(t *testing.T, args ...string) *targets.Target {
	t.Helper()
	tg := targets.StartCommand(t, append([]string{threadnames(t)}, args...)...)
	select {
	case <-tg.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("threadnames not ready: %s", tg.Output())
	}
	return tg
}

// roots returns the samples per root frame of a folded file.
func roots(t *testing.T, path string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for stack, n := range parseFolded(t, path) {
		root, _, _ := strings.Cut(stack, ";")
		out[root] += n
	}
	return out
}

// TestRecordThreads: --threads gives each thread a root frame "NAME TID"
// (hot, warm and waker each have theirs), and pprof labels the samples
// with thread, thread_name and pid.
func TestRecordThreads(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := startThreadnames(t)
	pid := strconv.Itoa(tg.PID())
	names, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "threads.folded")
	// --idle: every thread counts at every tick, waker too.
	code, stderr := record(t, "-p", pid, "--threads", "--idle", "--duration", "1s", "-q", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	got := roots(t, out)
	for tid, name := range names {
		if name != "hot" && name != "warm" && name != "waker" {
			continue
		}
		if root := name + " " + strconv.Itoa(tid); got[root] == 0 {
			t.Errorf("no stack under the root frame %q; roots: %v", root, got)
		}
	}
	// The Go runtime may start threads after names was read.
	for root := range got {
		i := strings.LastIndexByte(root, ' ')
		if tid := atoi(root[i+1:]); i < 0 || tid <= 0 || names[tid] != "" && names[tid] != root[:i] {
			t.Errorf("root frame %q is not \"NAME TID\" of a thread of %v", root, names)
		}
	}

	pb := filepath.Join(dir, "threads.pb.gz")
	if code, stderr := record(t, "-p", pid, "--threads", "--duration", "500ms", "-q", "-o", pb); code != 0 {
		t.Fatalf("pprof: exit %d\n%s", code, stderr)
	}
	b, _ := os.ReadFile(pb)
	p, err := pprof.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	hot := false
	for _, s := range p.Sample {
		if s.NumLabel["pid"][0] != int64(tg.PID()) || len(s.NumLabel["thread"]) != 1 {
			t.Fatalf("pprof labels %v %v, want pid %d and thread", s.Label, s.NumLabel, tg.PID())
		}
		hot = hot || s.Label["thread_name"][0] == "hot"
	}
	if !hot {
		t.Errorf("no pprof sample labelled thread_name hot")
	}
	checkUntraced(t, tg.PID())
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestRecordSeveralProcesses: -p A,B --threads holds the threads of both,
// and so does -p A -p B.
func TestRecordSeveralProcesses(t *testing.T) {
	t.Parallel()
	needRoot(t)
	a, b := startThreadnames(t), startThreadnames(t)
	dir := t.TempDir()
	for i, pids := range [][]string{
		{"-p", strconv.Itoa(a.PID()) + "," + strconv.Itoa(b.PID())},
		{"-p", strconv.Itoa(a.PID()), "-p", strconv.Itoa(b.PID())},
	} {
		out := filepath.Join(dir, strconv.Itoa(i)+".folded")
		// A loaded machine may leave a hot thread without a sample for a
		// second: then once more, longer.
		var missing []string
		for _, d := range []string{"1s", "4s"} {
			args := append(slices.Clone(pids), "--threads", "--idle", "--duration", d, "-o", out)
			code, stderr := record(t, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d\n%s", pids, code, stderr)
			}
			if !strings.Contains(stderr, "2 processes recorded into one profile") {
				t.Errorf("%v: summary does not say 2 processes:\n%s", pids, stderr)
			}
			got := roots(t, out)
			missing = nil
			for _, tg := range []*targets.Target{a, b} {
				names, _ := tg.Threads()
				for tid, name := range names {
					if name == "hot" && got["hot "+strconv.Itoa(tid)] == 0 {
						missing = append(missing, fmt.Sprintf("process %d's thread hot %d (roots %v)", tg.PID(), tid, got))
					}
				}
			}
			if len(missing) == 0 {
				break
			}
		}
		for _, m := range missing {
			t.Errorf("%v: no samples of %s", pids, m)
		}
	}
	checkUntraced(t, a.PID())
	checkUntraced(t, b.PID())
	if code, stderr := record(t, "-p", strconv.Itoa(a.PID())+",x"); code != exitUsage {
		t.Errorf("-p A,x: exit %d, want %d\n%s", code, exitUsage, stderr)
	}
}

// TestRecordSubprocesses: --subprocesses follows a child the recorded
// shell starts after the attach, with its threads.
func TestRecordSubprocesses(t *testing.T) {
	t.Parallel()
	needRoot(t)
	bin := threadnames(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "sub.folded")
	script := `sleep 0.3; "$0" 1 >/dev/null; exit 3`
	code, stderr := record(t, "--subprocesses", "--threads", "--idle", "-o", out, "--", "/bin/sh", "-c", script, bin)
	if code != 3 {
		t.Fatalf("exit %d, want the command's 3\n%s", code, stderr)
	}
	got := roots(t, out)
	seen := map[string]bool{}
	for root := range got {
		name, _, _ := strings.Cut(root, " ")
		seen[name] = true
	}
	for _, name := range []string{"hot", "warm", "waker"} {
		if !seen[name] {
			t.Errorf("child's thread %s not recorded; roots %v\n%s", name, got, stderr)
		}
	}
	// The perf back end follows the child too (on-CPU only: the spinning
	// thread is the one sure to be sampled).
	code, stderr = record(t, "--backend", "perf", "--subprocesses", "--threads", "-o", out, "--", "/bin/sh", "-c", script, bin)
	if code != 3 {
		t.Fatalf("--backend perf: exit %d, want the command's 3\n%s", code, stderr)
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(roots(t, out))), func(r string) bool { return strings.HasPrefix(r, "hot ") }) {
		t.Errorf("--backend perf: child's thread hot not recorded; roots %v\n%s", roots(t, out), stderr)
	}
	// Without --subprocesses only the shell is recorded.
	code, stderr = record(t, "--threads", "--idle", "-o", out, "--", "/bin/sh", "-c", script, bin)
	if code != 3 {
		t.Fatalf("exit %d, want 3\n%s", code, stderr)
	}
	for root := range roots(t, out) {
		if strings.HasPrefix(root, "hot ") {
			t.Errorf("child recorded without --subprocesses: %s", root)
		}
	}
}

// TestRecordThreadName: --thread-name keeps the matching threads only.
func TestRecordThreadName(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := startThreadnames(t)
	out := filepath.Join(t.TempDir(), "tn.folded")
	code, stderr := record(t, "-p", strconv.Itoa(tg.PID()), "--thread-name", "^(hot|waker)$", "--threads", "--idle", "--duration", "800ms", "-q", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	seen := map[string]bool{}
	for root := range roots(t, out) {
		name, _, _ := strings.Cut(root, " ")
		seen[name] = true
	}
	if !seen["hot"] || !seen["waker"] || len(seen) != 2 {
		t.Errorf("threads recorded: %v, want hot and waker", seen)
	}
	if code, _ := record(t, "-p", strconv.Itoa(tg.PID()), "--thread-name", "(", "-o", out); code != exitUsage {
		t.Errorf("bad --thread-name regexp: exit %d, want %d", code, exitUsage)
	}
	checkUntraced(t, tg.PID())
}

// TestDumpThreadName: dump --thread-name shows the matching threads only,
// and says so when none matches.
func TestDumpThreadName(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := startThreadnames(t)
	pid := strconv.Itoa(tg.PID())
	r := stacktop(t, "dump", "-p", pid, "--thread-name", "^wa", "--json")
	var doc struct {
		Threads []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("dump --json: %v\n%s", err, r.stderr)
	}
	var names []string
	for _, th := range doc.Threads {
		names = append(names, th.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "waker,warm" {
		t.Errorf("dump --thread-name ^wa shows %v, want warm and waker", names)
	}
	r = stacktop(t, "dump", "-p", pid, "--thread-name", "^nothing$")
	checkAttachFailure(t, r, "no thread of process "+pid+" has a name matching")
	checkUntraced(t, tg.PID())
}

// TestRecordLines: --lines names folded frames "func (file:line)" on a
// program built with -g; it is refused for formats it does not apply to.
func TestRecordLines(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := targets.Start(t, "cxxinline-sframe3")
	dir := t.TempDir()
	out := filepath.Join(dir, "lines.folded")
	code, stderr := record(t, "-p", strconv.Itoa(tg.PID()), "--lines", "--duration", "2s", "-q", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	withLine := regexp.MustCompile(`^[^;]+ \([^;():]+\.cc:\d+\)$`)
	found := false
	for stack := range parseFolded(t, out) {
		for _, fr := range strings.Split(stack, ";") {
			found = found || withLine.MatchString(fr)
		}
	}
	if !found {
		t.Errorf("no frame named \"func (file.cc:line)\" in %v", parseFolded(t, out))
	}
	if code, _ := record(t, "-p", strconv.Itoa(tg.PID()), "--lines", "-o", filepath.Join(dir, "x.svg")); code != exitUsage {
		t.Errorf("--lines with svg output: exit %d, want %d", code, exitUsage)
	}
	checkUntraced(t, tg.PID())
}

// TestTIDListAllCommands: --tid takes the same list on dump, record and
// top. dump with two TIDs shows exactly those threads; a TID that is not
// the target's is exit 2 on dump and record before anything is stopped.
// --no-inline and --no-lines exist on all three.
func TestTIDListAllCommands(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tg := startThreadnames(t)
	pid := strconv.Itoa(tg.PID())
	names, err := tg.Threads()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for tid, name := range names {
		if name == "hot" || name == "waker" {
			want[name] = tid
		}
	}
	if len(want) != 2 {
		t.Fatalf("threads %v: no hot and waker", names)
	}
	list := strconv.Itoa(want["hot"]) + "," + strconv.Itoa(want["waker"])
	r := stacktop(t, "dump", "-p", pid, "--tid", list, "--no-lines", "--json")
	var doc struct {
		Threads []struct {
			TID  int
			Name string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("dump --tid %s --json: %v\n%s", list, err, r.stderr)
	}
	got := map[string]int{}
	for _, th := range doc.Threads {
		got[th.Name] = th.TID
	}
	if len(got) != 2 || got["hot"] != want["hot"] || got["waker"] != want["waker"] {
		t.Errorf("dump --tid %s shows %v, want %v", list, got, want)
	}
	other := strconv.Itoa(os.Getpid())
	checkAttachFailure(t, stacktop(t, "dump", "-p", pid, "--tid", strconv.Itoa(want["hot"])+","+other),
		"--tid "+other+" is not a thread of process "+pid)

	out := filepath.Join(t.TempDir(), "tids.folded")
	code, stderr := record(t, "-p", pid, "--tid", list, "--threads", "--idle", "--no-inline", "--no-lines", "--duration", "500ms", "-q", "-o", out)
	if code != 0 {
		t.Fatalf("record --tid %s: exit %d\n%s", list, code, stderr)
	}
	for root := range roots(t, out) {
		if name, _, _ := strings.Cut(root, " "); name != "hot" && name != "waker" {
			t.Errorf("record --tid %s recorded thread %s", list, root)
		}
	}
	if code, _ := record(t, "-p", pid, "--lines", "--no-lines", "-o", out); code != exitUsage {
		t.Errorf("--lines with --no-lines: exit %d, want %d", code, exitUsage)
	}
	for _, cmd := range []string{"dump", "record", "top"} {
		r := stacktop(t, cmd, "-h")
		for _, flag := range []string{"-t, --tid tids", "--stack-window", "--unwinder", "--no-cfi", "--no-inline", "--no-lines", "Exit codes: see docs/"} {
			if !strings.Contains(r.stderr, flag) {
				t.Errorf("%s -h does not list %s", cmd, flag)
			}
		}
	}
	checkUntraced(t, tg.PID())
}
