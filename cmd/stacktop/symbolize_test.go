package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestPprofSymbolizedLater: a program stripped of every symbol, its
// unstripped build kept elsewhere (as a build farm keeps them), is
// recorded. Its
// frames have no names in the profile, only addresses in a mapping with
// the build ID; given the debug file, `go tool pprof` names them.
func TestPprofSymbolizedLater(t *testing.T) {
	t.Parallel()
	needRoot(t)
	for _, tool := range []string{"gcc", "strip", "addr2line"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(hostileSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	mustRun(t, "gcc", "-O1", "-g", "-Wl,--build-id", "-o", bin, src)
	id := elfBuildID(t, bin)
	// The symbol store keeps the unstripped build under its build ID, as
	// pprof looks (PPROF_BINARY_PATH/BUILDID/NAME). (A file of
	// objcopy --only-keep-debug does not serve pprof: its segments have
	// no file offsets, from which pprof finds where the code was loaded.)
	symbols := filepath.Join(dir, "symbols")
	if err := os.MkdirAll(filepath.Join(symbols, id), 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "cp", bin, filepath.Join(symbols, id, "prog"))
	mustRun(t, "strip", "--strip-all", bin)

	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	out := filepath.Join(dir, "prof.pb.gz")
	if r := stacktop(t, "record", "--no-debuginfod", "--duration", "1s", "-o", out, "-p", strconv.Itoa(tg.PID())); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	pf, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(pf)
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	unnamed := 0
	for _, loc := range p.Location {
		m := loc.Mapping
		if m == nil || m.BuildID != id {
			continue
		}
		if len(loc.Line) == 0 {
			unnamed++
		}
		for _, l := range loc.Line {
			if strings.Contains(l.Function.Name, "+0x") {
				t.Errorf("location %#x named %q: an address as a name, which pprof cannot replace", loc.Address, l.Function.Name)
			}
		}
		if m.HasFunctions && len(loc.Line) == 0 {
			t.Errorf("mapping %s says it has functions, and location %#x has none", m.File, loc.Address)
		}
	}
	if unnamed == 0 {
		t.Fatalf("no unnamed location in the program's mapping (build ID %s)", id)
	}

	// Upstream pprof: `go tool pprof` reads no build IDs, and refuses
	// every file PPROF_BINARY_PATH finds for a mapping that has one.
	pprofBin := filepath.Join(dir, "pprof")
	if b, err := exec.Command("go", "build", "-o", pprofBin, "codeberg.org/stacktop/stacktop/internal/testsupport/pprofcli").CombinedOutput(); err != nil {
		t.Fatalf("building pprof: %v\n%s", err, b)
	}
	cmd := exec.Command(pprofBin, "-symbolize=local", "-traces", out)
	cmd.Env = append(os.Environ(), "PPROF_BINARY_PATH="+symbols)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pprof: %v\n%s", err, text)
	}
	for _, fn := range []string{"hostile_spin", "main", "_start"} {
		if !strings.Contains(string(text), "   "+fn+"\n") {
			t.Errorf("pprof did not name %s from the unstripped build:\n%s", fn, text)
		}
	}
}
