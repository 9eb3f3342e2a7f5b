package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestGoInstallFromProxy: what a Go user types first,
// `go install MODULE/cmd/stacktop@VERSION`, works on the committed tree.
// The module is served as a version from a file-system module proxy built
// here from HEAD (x/mod/zip: the same rules as the public proxy: no nested
// modules, no files git does not track); its dependencies come from the
// local module cache's download directory, itself a proxy layout, so the
// test runs offline (no checksum database either); GOPATH and the module
// cache are new and empty, as on a machine that never built stacktop.
func TestGoInstallFromProxy(t *testing.T) {
	t.Parallel() // mostly the compiler: it may overlap the tests that wait
	if testing.Short() {
		t.Skip("builds stacktop from a module proxy")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: the module zip is made from HEAD")
	}
	root, err := targets.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout: the module zip is made from HEAD")
	}
	modPath := goEnv(t, root, "GOMOD")
	gomod, err := os.ReadFile(modPath)
	if err != nil {
		t.Fatal(err)
	}
	mod := module.Version{Path: modulePath(t, gomod), Version: "v0.1.0"}

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	escaped, err := module.EscapePath(mod.Path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": mod.Version, "Time": time.Now().UTC().Format(time.RFC3339)})
	must(t, os.WriteFile(filepath.Join(at, "list"), []byte(mod.Version+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(at, mod.Version+".info"), info, 0o644))
	must(t, os.WriteFile(filepath.Join(at, mod.Version+".mod"), gomod, 0o644))
	zf, err := os.Create(filepath.Join(at, mod.Version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromVCS(zf, mod, root, "HEAD", ""); err != nil {
		t.Fatalf("module zip of HEAD: %v", err)
	}
	must(t, zf.Close())

	deps := filepath.Join(goEnv(t, root, "GOMODCACHE"), "cache", "download")
	gobin := filepath.Join(tmp, "bin")
	cmd := exec.Command("go", "install", "-trimpath", mod.Path+"/cmd/stacktop@"+mod.Version)
	cmd.Dir = tmp // outside the module: @version installs ignore any go.mod
	cmd.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(deps),
		// A version no checksum database has seen, and dependencies from
		// this module cache, verified against go.sum when they came in;
		// the test must not need the network.
		"GOSUMDB=off",
		"GOPATH="+filepath.Join(tmp, "gopath"),
		"GOMODCACHE="+filepath.Join(tmp, "gopath", "pkg", "mod"),
		"GOBIN="+gobin,
		"GOFLAGS=-modcacherw", // so that TempDir's cleanup can remove it
		"GOTOOLCHAIN=local",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/stacktop@%s: %v\n%s", mod.Path, mod.Version, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "stacktop"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("installed stacktop --version: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(mod.Version)) {
		t.Errorf("installed stacktop --version = %q, want the module version %s", out, mod.Version)
	}
}

func goEnv(t *testing.T, dir, name string) string {
	t.Helper()
	cmd := exec.Command("go", "env", name)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func modulePath(t *testing.T, gomod []byte) string {
	t.Helper()
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
