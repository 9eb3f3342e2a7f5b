package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// completionScript writes stacktop's script for shell to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	r := stacktop(t, "completion", shell)
	if r.code != 0 || r.stdout == "" {
		t.Fatalf("completion %s: exit %d\n%s", shell, r.code, r.stderr)
	}
	path := filepath.Join(t.TempDir(), "stacktop."+shell)
	if err := os.WriteFile(path, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompletionBash sources the script in bash and asks it what it
// completes, as bash does on Tab.
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := completionScript(t, "bash")
	complete := func(words ...string) []string {
		t.Helper()
		// COMP_WORDS as bash splits the line; the last word is the one
		// being completed.
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := `source "$1"; COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _stacktop; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", "-c", prog, "bash", script).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"stacktop", "rec"}, []string{"record"}},
		{[]string{"stacktop", "co"}, []string{"completion", "convert"}},
		{[]string{"stacktop", "convert", "x", "--di"}, []string{"--diff"}},
		{[]string{"stacktop", "record", "--thr"}, []string{"--thread-name", "--threads"}},
		{[]string{"stacktop", "record", "-q", "--sub"}, []string{"--subprocesses"}},
		{[]string{"stacktop", "top", "--sort"}, []string{"--sort-total"}},
		{[]string{"stacktop", "record", "--format", "sp"}, []string{"speedscope"}},
		{[]string{"stacktop", "record", "--rate", ""}, nil},
		{[]string{"stacktop", "completion", "f"}, []string{"fish"}},
		{[]string{"stacktop", "record", "--", "bas"}, []string{"bash"}},
	} {
		got := complete(c.words...)
		if c.want == nil {
			if len(got) != 0 {
				t.Errorf("%q completes to %v, want nothing", c.words, got)
			}
			continue
		}
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %v, want %s among them", c.words, got, w)
			}
		}
		if c.words[len(c.words)-2] != "--" && len(got) != len(c.want) {
			t.Errorf("%q completes to %v, want %v", c.words, got, c.want)
		}
	}
	if pids := complete("stacktop", "dump", "-p", "1"); !slices.Contains(pids, "1") {
		t.Errorf("-p 1 completes to %v, want PID 1 among them", pids)
	}
}

// TestCompletionFish asks fish itself (complete -C) what the script
// completes; TestCompletionZsh only checks the syntax (zsh has no batch
// completion mode).
func TestCompletionFish(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish not installed (scripts/install-test-deps.sh installs it)")
	}
	script := completionScript(t, "fish")
	out, err := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C "stacktop record --thr"; complete -C "stacktop rec"; complete -C "stacktop record --format "`, script).CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, out)
	}
	for _, want := range []string{"--threads\t", "--thread-name\t", "record\t", "speedscope"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("fish completions lack %q:\n%s", want, out)
		}
	}
}

func TestCompletionZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh not installed (scripts/install-test-deps.sh installs it)")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command("zsh", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(script)
	for _, want := range []string{"#compdef stacktop", "'--threads[", "'-p[", ":_pids'", "(pprof folded speedscope svg)"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("zsh script lacks %q", want)
		}
	}
}

func TestCompletionUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if r := stacktop(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, "bash|zsh|fish") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
