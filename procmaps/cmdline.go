package procmaps

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Cmdline returns the process's command line, arguments separated by
// spaces, or its comm in brackets when the command line is empty (kernel
// threads, zombies), as ps prints them. It is for display only: "" if the
// process is gone. Control characters and bytes that are not UTF-8 are
// escaped (see EscapeControl): a newline in an argument must not break a
// header or a file format line.
func Cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return ""
		}
		return "[" + EscapeControl(strings.TrimSuffix(string(comm), "\n")) + "]"
	}
	args := bytes.Split(b, []byte{0})
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = EscapeControl(string(a))
	}
	return strings.Join(parts, " ")
}

// EscapeControl returns s with control characters written as Go escapes
// (\n, \t, \r, \x1b, \u0085) and bytes that are not UTF-8 as \xNN, so the
// text can be shown on one line of a terminal without driving it.
func EscapeControl(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
