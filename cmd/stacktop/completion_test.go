package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/procmaps"
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

// pathWithStacktop is $PATH with the binary under test first: the scripts
// run `stacktop __complete ...` by the name typed.
func pathWithStacktop() string {
	return filepath.Dir(stacktopBin) + string(os.PathListSeparator) + os.Getenv("PATH")
}

// bashComplete sources the script in a real bash and runs its completion
// function on words as bash does on Tab (the last word is the one being
// completed), returning COMPREPLY.
func bashComplete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	// Without the bash-completion package the script needs its word
	// splitter; the stand-in splits as bash did (no "=" or ":" handling,
	// which these words do not need). compopt only works inside a real
	// completion.
	prog := `source "$1"
if ! declare -F _get_comp_words_by_ref >/dev/null; then
	_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
compopt() { :; }
COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMP_TYPE=9
__start_stacktop
printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", "-c", prog, "bash", script)
	cmd.Env = append(os.Environ(), "PATH="+pathWithStacktop())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// TestCompletionBash sources cobra's script in bash and asks it what it
// completes: subcommands, flags, and the values of flags.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := completionScript(t, "bash")
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		words []string
		want  []string
		exact bool // nothing else offered
	}{
		{[]string{"stacktop", "rec"}, []string{"record"}, true},
		{[]string{"stacktop", "co"}, []string{"completion", "convert"}, true},
		{[]string{"stacktop", "convert", "x", "--di"}, []string{"--diff"}, true},
		{[]string{"stacktop", "record", "--for"}, []string{"--format"}, true},
		{[]string{"stacktop", "record", "--thr"}, []string{"--thread-name", "--threads"}, true},
		{[]string{"stacktop", "record", "-q", "--sub"}, []string{"--subprocesses"}, true},
		{[]string{"stacktop", "top", "--sort"}, []string{"--sort-total"}, true},
		{[]string{"stacktop", "record", "--format", ""}, []string{"pprof", "folded", "speedscope", "svg"}, true},
		{[]string{"stacktop", "convert", "x", "-f", "sp"}, []string{"speedscope"}, true},
		{[]string{"stacktop", "top", "--backend", ""}, []string{"ptrace", "perf", "auto"}, true},
		{[]string{"stacktop", "dump", "--unwinder", "sframe,"}, []string{"sframe,cfi", "sframe,fp"}, false},
		{[]string{"stacktop", "record", "--rate", ""}, nil, true},
		{[]string{"stacktop", "completion", "f"}, []string{"fish"}, true},
		{[]string{"stacktop", "record", "--", "bas"}, []string{"bash"}, false},
		{[]string{"stacktop", "record", "-p", ""}, []string{self, "1"}, false},
		{[]string{"stacktop", "top", "-p", "1," + self[:1]}, []string{"1," + self}, false},
		{[]string{"stacktop", "dump", ""}, []string{self}, false},
	} {
		got := bashComplete(t, script, c.words...)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %v, want %s among them", c.words, got, w)
			}
		}
		if c.exact && len(got) != len(c.want) {
			t.Errorf("%q completes to %v, want %v", c.words, got, c.want)
		}
	}
}

// TestCompletePIDDescription: -p's values carry the process's name, which
// zsh, fish and bash (when listing) show beside each PID.
func TestCompletePIDDescription(t *testing.T) {
	t.Parallel()
	r := stacktop(t, "__complete", "record", "-p", "")
	want := strconv.Itoa(os.Getpid()) + "\t" + procmaps.Comm(os.Getpid())
	if r.code != 0 || !slices.Contains(strings.Split(r.stdout, "\n"), want) {
		t.Errorf("__complete record -p '': exit %d, want a line %q in\n%s", r.code, want, r.stdout)
	}
}

// TestCompletionFish asks fish itself (complete -C) what the script
// completes; TestCompletionZsh only checks the syntax (zsh has no batch
// completion mode).
func TestCompletionFish(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish not installed (scripts/install-test-deps.sh installs it)")
	}
	script := completionScript(t, "fish")
	cmd := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C "stacktop record --thr"; complete -C "stacktop rec"; complete -C "stacktop record --format "`, script)
	cmd.Env = append(os.Environ(), "PATH="+pathWithStacktop())
	out, err := cmd.CombinedOutput()
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
	t.Parallel()
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh not installed (scripts/install-test-deps.sh installs it)")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command("zsh", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(script)
	for _, want := range []string{"#compdef stacktop", "__complete"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("zsh script lacks %q", want)
		}
	}
}

func TestCompletionPowerShell(t *testing.T) {
	t.Parallel()
	b, _ := os.ReadFile(completionScript(t, "powershell"))
	if !strings.Contains(string(b), "Register-ArgumentCompleter") {
		t.Errorf("powershell script has no Register-ArgumentCompleter:\n%.500s", b)
	}
}

func TestCompletionUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if r := stacktop(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, "bash|zsh|fish|powershell") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
