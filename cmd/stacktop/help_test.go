package main

import (
	"strings"
	"testing"
)

// TestHelp: --help and -h exit 0 and read like kubectl's: the usage
// lines, examples, flags under their groups, the page with the exit codes.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  stacktop COMMAND [flags]", "Commands:\n", "  record ", "Examples:\n", "--version"}},
		{[]string{"record", "--help"}, []string{"Usage:\n  stacktop record -p PID[,PID...] [flags]\n  stacktop record [flags] -- CMD [ARGS...]",
			"Examples:\n", "Target flags:\n  -p, --pid pids", "Sampling flags:\n  -r, --rate float", "Output flags:\n  -o, --output string",
			"Continuous upload flags:\n", "Other flags:\n  -h, --help", "Exit codes: see docs/record.md"}},
		{[]string{"top", "-h"}, []string{"View flags:\n      --window duration", "Exit codes: see docs/top.md"}},
		{[]string{"dump", "-h"}, []string{"stacktop dump [-p] PID [flags]", "-t, --tid tids"}},
		{[]string{"help", "convert"}, []string{"stacktop convert IN --diff BASE -o OUT.svg"}},
	} {
		r := stacktop(t, c.args...)
		if r.code != 0 {
			t.Errorf("%q: exit %d", c.args, r.code)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%q lacks %q:\n%s", c.args, w, r.stderr)
			}
		}
	}
	// A usage error says what is wrong first, then the usage lines.
	r := stacktop(t, "record", "-p", "1", "--bogus")
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, "stacktop: unknown flag: --bogus\nusage: stacktop record") {
		t.Errorf("record --bogus: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := stacktop(t, "recrod"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "recrod" (did you mean record?)`) {
		t.Errorf("recrod: exit %d, stderr %q", r.code, r.stderr)
	}
}
