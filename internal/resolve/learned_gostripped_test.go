package resolve

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// TestLearnedStrippedGo: a Go program without symbol table or DWARF is
// named from its pclntab, and its frames' offsets come from the pclntab's
// function entries. Named again from what an earlier run learned, the
// stacks must be the same (offsets included).
func TestLearnedStrippedGo(t *testing.T) {
	needRoot(t)
	bin := filepath.Join(t.TempDir(), "goprog-stripped")
	if out, err := exec.Command("objcopy", "--strip-all", targets.Path("goprog"), bin).CombinedOutput(); err != nil {
		t.Skipf("objcopy: %v\n%s", err, out)
	}
	tg := startReady(t, bin)
	target, name := learningTarget(t, tg.PID())
	target.freshSymbols()
	want, _ := name()
	target.freshSymbols() // saves what was learned
	got, _ := name()
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			for j := range want[i] {
				if j < len(got[i]) && got[i][j] != want[i][j] {
					t.Errorf("stack %d frame %d: learned %s+%#x, want %s+%#x", i, j,
						got[i][j].Function, got[i][j].Offset, want[i][j].Function, want[i][j].Offset)
				}
			}
			t.Fatalf("stack %d named differently from what was learned", i)
		}
	}
}
