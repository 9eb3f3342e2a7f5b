package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := stacktop(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "stacktop ") || !strings.Contains(r.stdout, runtime.Version()) {
			t.Errorf("stacktop %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := stacktop(t, "version", "extra"); r.code != exitUsage {
		t.Errorf("version extra: exit %d, want %d", r.code, exitUsage)
	}
}

// TestVersionRevision builds stacktop with VCS stamping and checks that
// --version reports the commit checked out.
func TestVersionRevision(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v)", err)
	}
	bin := filepath.Join(t.TempDir(), "stacktop")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "revision ") {
		// The go command finds a repository by a .git directory; a
		// git worktree has a .git file, and gets no stamp.
		t.Skipf("the build has no VCS stamp (a git worktree?): %s", out)
	}
	if want := "revision " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("--version says %q, want %q", out, want)
	}
}
