package main

import (
	"slices"
	"strings"
	"testing"
)

// TestGNULongFlags: the single-dash long flags of the first command line
// are spelled --NAME before cobra parses them, and nothing else is touched:
// values of flags, arguments after --, the command record starts.
func TestGNULongFlags(t *testing.T) {
	t.Parallel()
	root := newRootCommand()
	for _, c := range []struct{ in, want string }{
		{"record -rate 99 -p 1", "record --rate 99 -p 1"},
		{"record -p 1 -duration=5s -no-lines -q", "record -p 1 --duration=5s --no-lines -q"},
		{"record -qp 1 -idle", "record -qp 1 --idle"},
		{"record -p1234 -idle", "record -p1234 --idle"},
		{"record -help", "record --help"},
		{"dump 1234 -no-lines -json -tid 5", "dump 1234 --no-lines --json --tid 5"},
		{"-version", "--version"},
		// The value of a flag, whatever it looks like.
		{"record --thread-name -rate -p 1", "record --thread-name -rate -p 1"},
		{"record -o -rate -p 1", "record -o -rate -p 1"},
		{"record -thread-name -rate -p 1", "record --thread-name -rate -p 1"},
		// The command to start, and its flags.
		{"record -p 1 -- sh -rate", "record -p 1 -- sh -rate"},
		{"record -rate 5 sleep -rate", "record --rate 5 sleep -rate"},
		// Not a flag of the command: left for pflag to refuse.
		{"sframe -rate x", "sframe -rate x"},
		{"convert in.pb.gz -diff base.pb.gz -o out.svg", "convert in.pb.gz --diff base.pb.gz -o out.svg"},
	} {
		got := strings.Join(gnuLongFlags(root, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.in, got, c.want)
		}
	}
	args := []string{"record", "-rate", "5"}
	gnuLongFlags(root, args)
	if !slices.Equal(args, []string{"record", "-rate", "5"}) {
		t.Errorf("the caller's arguments were changed: %q", args)
	}
}

// TestSingleDashLongFlags runs the binary with the flag-package spelling:
// the flags reach their checks (a usage error naming --rate) and their
// command (dump's PID after the flags, as pstack's users type it).
func TestSingleDashLongFlags(t *testing.T) {
	t.Parallel()
	r := stacktop(t, "record", "-rate", "0", "-p", "1")
	if first, _, _ := strings.Cut(r.stderr, "\n"); r.code != exitUsage || !strings.Contains(first, "--rate 0") {
		t.Errorf("record -rate 0: exit %d, stderr %q", r.code, r.stderr)
	}
	checkAttachFailure(t, stacktop(t, "dump", "-no-lines", "99999999"), "no such process")
	if r := stacktop(t, "-version"); r.code != 0 || !strings.HasPrefix(r.stdout, "stacktop ") {
		t.Errorf("-version: exit %d, stdout %q", r.code, r.stdout)
	}
}
