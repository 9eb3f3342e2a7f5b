package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// manDir is where the checked-in man pages are.
var manDir = filepath.Join("..", "..", "docs", "man")

// TestManPagesUpToDate regenerates the man pages and requires docs/man to
// hold exactly them: a flag or command changed without `go run
// ./cmd/stacktop man docs/man` fails here instead of shipping stale pages.
func TestManPagesUpToDate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := stacktop(t, "man", dir); r.code != 0 {
		t.Fatalf("man %s: exit %d\n%s", dir, r.code, r.stderr)
	}
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	const fix = "regenerate them: go run ./cmd/stacktop man docs/man"
	got, want := names(dir), names(manDir)
	if !slices.Equal(got, want) {
		t.Fatalf("docs/man has %v, the command tree makes %v; %s", want, got, fix)
	}
	for _, name := range got {
		fresh, _ := os.ReadFile(filepath.Join(dir, name))
		old, _ := os.ReadFile(filepath.Join(manDir, name))
		if !bytes.Equal(fresh, old) {
			t.Errorf("docs/man/%s is out of date; %s", name, fix)
		}
	}
}

// TestManPageRenders formats every page with groff, all warnings on (or,
// without groff, with man -l), and requires it to say nothing.
func TestManPageRenders(t *testing.T) {
	t.Parallel()
	pages, _ := filepath.Glob(filepath.Join(manDir, "*.1"))
	if len(pages) == 0 {
		t.Fatal("no man pages in docs/man")
	}
	render := func(page string) *exec.Cmd {
		if _, err := exec.LookPath("groff"); err == nil {
			return exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", page)
		}
		if _, err := exec.LookPath("man"); err == nil {
			cmd := exec.Command("man", "--warnings", "-l", page)
			cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat")
			return cmd
		}
		t.Skip("neither groff nor man installed")
		return nil
	}
	for _, page := range pages {
		cmd := render(page)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("%s %s: %v\n%s", cmd.Path, page, err, stderr.Bytes())
		}
	}
}
