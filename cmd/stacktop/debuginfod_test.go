package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDumpDebuginfod dumps a stripped build of the split target whose
// debug file only a real debuginfod server (Debian's, `debuginfod -F`)
// has: no file:line while the server is down (and one line saying so),
// file:line with it up, the file then in the elfutils cache, and a second
// run with the server gone still has the lines, from that cache.
// --no-debuginfod fetches nothing.
func TestDumpDebuginfod(t *testing.T) {
	t.Parallel()
	needRoot(t)
	for _, tool := range []string{"gcc", "objcopy", "debuginfod"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/install-test-deps.sh installs it)", tool)
		}
	}
	root, err := targets.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	binDir, srvDir, cache := filepath.Join(dir, "bin"), filepath.Join(dir, "srv"), filepath.Join(dir, "cache")
	for _, d := range []string{binDir, srvDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(root, "testdata", "targets")
	full := filepath.Join(dir, "split-g")
	mustRun(t, "gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-Wl,--build-id", "-I", src, "-o", full, filepath.Join(src, "split.c"), "-lpthread")
	mustRun(t, "objcopy", "--only-keep-debug", full, filepath.Join(srvDir, "split.debug"))
	stripped := filepath.Join(binDir, "split")
	mustRun(t, "objcopy", "--strip-debug", full, stripped)
	os.Remove(full)
	id := ""
	for _, line := range strings.Split(mustRun(t, "readelf", "-n", stripped), "\n") {
		if _, v, ok := strings.Cut(line, "Build ID: "); ok {
			id = strings.TrimSpace(v)
		}
	}
	if id == "" {
		t.Fatal("no build ID in the stripped target")
	}

	tg := targets.StartCommand(t, stripped)
	select {
	case <-tg.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("the target is not ready:\n%s", tg.Output())
	}
	port := freePort(t)
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	dump := func(cacheDir string, extra ...string) result {
		t.Helper()
		cmd := exec.Command(stacktopBin, append([]string{"dump", "-p", strconv.Itoa(tg.PID())}, extra...)...)
		cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS="+url, "DEBUGINFOD_CACHE_PATH="+cacheDir, "DEBUGINFOD_TIMEOUT=5")
		return run(t, cmd)
	}
	hasLines := func(r result) bool { return strings.Contains(r.stdout, "split.c:") }

	// Server down: no lines, one clear line on stderr.
	r := dump(cache)
	if hasLines(r) || !strings.Contains(r.stderr, "unreachable") {
		t.Errorf("server down: want no file:line and a line saying the server is unreachable\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}

	srv := exec.Command("debuginfod", "-F", srvDir, "-d", filepath.Join(dir, "db.sqlite"), "-p", strconv.Itoa(port))
	var srvLog targets.LockedBuffer
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stopSrv := func() {
		if srv.ProcessState == nil {
			srv.Process.Kill()
			srv.Wait()
		}
	}
	defer stopSrv()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/buildid/" + id + "/debuginfo")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("debuginfod has not indexed the debug file after 60 s:\n%s", srvLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// --no-debuginfod: nothing fetched, even with the server up.
	if r := dump(filepath.Join(dir, "cache-off"), "--no-debuginfod"); hasLines(r) {
		t.Errorf("--no-debuginfod: lines appeared:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "cache-off")); err == nil {
		t.Errorf("--no-debuginfod created a cache")
	}

	// Server up: lines, and the file in the elfutils cache layout.
	r = dump(cache)
	// Wherever the dump finds the thread (mostly hot or cold; sometimes
	// in the progress file's rename), main's frame is in split.c.
	if !hasLines(r) {
		t.Errorf("server up: want split.c's file:line\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", r.stdout, r.stderr, srvLog.String())
	}
	t.Logf("server up:\n%s", r.stdout)
	if _, err := os.Stat(filepath.Join(cache, id, "debuginfo")); err != nil {
		t.Errorf("not in the cache: %v", err)
	}

	// Server gone: the cache is enough, and nothing says unreachable.
	stopSrv()
	r = dump(cache)
	if !hasLines(r) || strings.Contains(r.stderr, "unreachable") {
		t.Errorf("cached run: want file:line and no server needed\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}
