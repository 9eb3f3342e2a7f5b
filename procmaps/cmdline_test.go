package procmaps

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestEscapeControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain -x":     "plain -x",
		"a\nb":         `a\nb`,
		"tab\there\r":  `tab\there\r`,
		"\x1b[31mred":  `\x1b[31mred`,
		"del\x7f":      `del\x7f`,
		"bad\xffutf8":  `bad\xffutf8`,
		"c1\u0085":     `c1\u0085`,
		"héllo, 世界":    "héllo, 世界",
		"\ufffd stays": "\ufffd stays",
	} {
		if got := EscapeControl(in); got != want {
			t.Errorf("EscapeControl(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCmdlineEscapes reads the command line of a real process whose
// argument holds a newline and a terminal escape.
func TestCmdlineEscapes(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 10; :", "name\nwith\x1b[2Jescape")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var got string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if got = Cmdline(cmd.Process.Pid); strings.Contains(got, "sleep") {
			break
		}
	}
	want := `/bin/sh -c sleep 10; : name\nwith\x1b[2Jescape`
	if got != want {
		t.Errorf("Cmdline = %q, want %q", got, want)
	}
}
