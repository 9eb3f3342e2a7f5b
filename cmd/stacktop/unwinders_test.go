package main

import (
	"strings"
	"testing"
)

// --unwinder is checked before anything attaches, on every command that
// walks stacks; an unknown or repeated name is a usage error that says
// what is known.
func TestUnwinderFlag(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"dump", "record", "top"} {
		for _, list := range []string{"dwarf", "sframe,sframe", "sframe,,fp"} {
			r := stacktop(t, cmd, "-p", "1", "--unwinder="+list)
			if r.code != exitUsage {
				t.Errorf("%s --unwinder=%q: exit %d, want %d", cmd, list, r.code, exitUsage)
			}
			if !strings.Contains(r.stderr, "--unwinder") {
				t.Errorf("%s --unwinder=%q: message %q does not name the flag", cmd, list, r.stderr)
			}
		}
	}
}
