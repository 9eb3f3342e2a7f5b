package procmaps

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Perms are the permission bits of a mapping, the "rwxp" column.
type Perms uint8

const (
	PermRead Perms = 1 << iota
	PermWrite
	PermExec
	PermPrivate // 'p': copy-on-write; 's' (shared) leaves it clear
)

func (p Perms) String() string {
	b := []byte("---s")
	if p&PermRead != 0 {
		b[0] = 'r'
	}
	if p&PermWrite != 0 {
		b[1] = 'w'
	}
	if p&PermExec != 0 {
		b[2] = 'x'
	}
	if p&PermPrivate != 0 {
		b[3] = 'p'
	}
	return string(b)
}

// Kind classifies a mapping by its path column.
type Kind uint8

const (
	KindFile     Kind = iota // a path (possibly deleted, possibly "anon_inode:..." or "/memfd:...")
	KindAnon                 // no path: anonymous memory (malloc arenas, JIT code, thread stacks)
	KindHeap                 // [heap]
	KindStack                // [stack] (the main thread's stack; old kernels also [stack:TID])
	KindVDSO                 // [vdso]
	KindVVar                 // [vvar] and [vvar_vclock]
	KindVsyscall             // [vsyscall]
	KindPseudo               // any other "[...]" name, e.g. [anon:name], [uprobes]
)

func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindAnon:
		return "anon"
	case KindHeap:
		return "heap"
	case KindStack:
		return "stack"
	case KindVDSO:
		return "vdso"
	case KindVVar:
		return "vvar"
	case KindVsyscall:
		return "vsyscall"
	case KindPseudo:
		return "pseudo"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Mapping is one line of /proc/PID/maps: the address range [Start, End).
type Mapping struct {
	Start, End uint64
	Perms      Perms
	Offset     uint64 // file offset of Start (page-aligned); meaningless for anonymous memory
	DevMajor   uint32
	DevMinor   uint32
	Inode      uint64
	// Path is the path column with any " (deleted)" suffix removed. Pseudo
	// mappings keep their brackets ("[stack]"); anonymous ones have "".
	Path    string
	Deleted bool // the path carried " (deleted)": the file was unlinked or replaced
	Kind    Kind
}

// Contains reports whether addr lies in [Start, End).
func (m *Mapping) Contains(addr uint64) bool { return addr >= m.Start && addr < m.End }

// Size is End - Start.
func (m *Mapping) Size() uint64 { return m.End - m.Start }

// IsExec reports whether the mapping is executable.
func (m *Mapping) IsExec() bool { return m.Perms&PermExec != 0 }

// IsFile reports whether the mapping is backed by a file the kernel can name
// (a real inode). anon_inode and memfd mappings count as files too.
func (m *Mapping) IsFile() bool { return m.Kind == KindFile && m.Inode != 0 }

func (m Mapping) String() string {
	s := fmt.Sprintf("%x-%x %s %08x %02x:%02x %d", m.Start, m.End, m.Perms, m.Offset, m.DevMajor, m.DevMinor, m.Inode)
	if m.Path != "" {
		s += " " + m.Path
	}
	if m.Deleted {
		s += " (deleted)"
	}
	return s
}

// ParseError reports a malformed maps line: the 1-based line and column
// (byte) where parsing stopped, and what was expected there.
type ParseError struct {
	Line int
	Col  int
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("procmaps: maps line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// maxLine bounds one maps line. The kernel writes at most PATH_MAX bytes of
// path, escaped; anything longer is not a maps file.
const maxLine = 64 << 10

const deletedSuffix = " (deleted)"

// ParseMaps parses the text of /proc/PID/maps. It is strict: every line must
// have all six columns with valid numbers, Start < End, and ranges must be
// ascending and disjoint (the kernel's order, which Find relies on). Paths
// may contain spaces; the kernel escapes newlines in them as \012, which is
// left as is.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var out []Mapping
	line := 0
	for sc.Scan() {
		line++
		m, err := parseMapsLine(sc.Bytes(), line)
		if err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && m.Start < out[n-1].End {
			return nil, &ParseError{Line: line, Col: 1, Msg: fmt.Sprintf("range %x-%x overlaps or precedes the previous one ending at %x", m.Start, m.End, out[n-1].End)}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ParseError{Line: line + 1, Col: maxLine, Msg: "line too long"}
		}
		return nil, fmt.Errorf("procmaps: reading maps: %w", err)
	}
	return out, nil
}

// fieldCursor walks one line, remembering the column for errors.
type fieldCursor struct {
	b    []byte
	pos  int
	line int
}

func (c *fieldCursor) fail(col int, format string, args ...any) error {
	return &ParseError{Line: c.line, Col: col + 1, Msg: fmt.Sprintf(format, args...)}
}

// until returns the bytes up to (not including) sep, and moves past sep.
func (c *fieldCursor) until(sep byte, what string) ([]byte, int, error) {
	start := c.pos
	i := bytes.IndexByte(c.b[start:], sep)
	if i < 0 {
		return nil, start, c.fail(len(c.b), "missing %q after %s", sep, what)
	}
	c.pos = start + i + 1
	return c.b[start : start+i], start, nil
}

func (c *fieldCursor) hex(sep byte, what string) (uint64, error) {
	f, col, err := c.until(sep, what)
	if err != nil {
		return 0, err
	}
	return parseNum(c, f, col, 16, what)
}

func parseNum(c *fieldCursor, f []byte, col, base int, what string) (uint64, error) {
	if len(f) == 0 {
		return 0, c.fail(col, "empty %s", what)
	}
	for i, ch := range f {
		ok := ch >= '0' && ch <= '9'
		if base == 16 {
			ok = ok || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
		}
		if !ok {
			return 0, c.fail(col+i, "bad %s %q", what, f)
		}
	}
	v, err := strconv.ParseUint(string(f), base, 64)
	if err != nil {
		return 0, c.fail(col, "%s %q out of range", what, f)
	}
	return v, nil
}

func parseMapsLine(b []byte, line int) (Mapping, error) {
	var m Mapping
	c := &fieldCursor{b: b, line: line}
	var err error
	if m.Start, err = c.hex('-', "start address"); err != nil {
		return m, err
	}
	if m.End, err = c.hex(' ', "end address"); err != nil {
		return m, err
	}
	if m.Start >= m.End {
		return m, c.fail(0, "start %x is not below end %x", m.Start, m.End)
	}
	perms, col, err := c.until(' ', "permissions")
	if err != nil {
		return m, err
	}
	if m.Perms, err = parsePerms(c, perms, col); err != nil {
		return m, err
	}
	if m.Offset, err = c.hex(' ', "offset"); err != nil {
		return m, err
	}
	maj, err := c.hex(':', "device major")
	if err != nil {
		return m, err
	}
	mnr, err := c.hex(' ', "device minor")
	if err != nil {
		return m, err
	}
	if maj > 0xffffffff || mnr > 0xffffffff {
		return m, c.fail(c.pos-1, "device %x:%x out of range", maj, mnr)
	}
	m.DevMajor, m.DevMinor = uint32(maj), uint32(mnr)

	// The inode ends the line when there is no path; otherwise spaces pad
	// the path out to a fixed column.
	col = c.pos
	end := bytes.IndexByte(b[col:], ' ')
	var ino []byte
	if end < 0 {
		ino, c.pos = b[col:], len(b)
	} else {
		ino, c.pos = b[col:col+end], col+end
	}
	if m.Inode, err = parseNum(c, ino, col, 10, "inode"); err != nil {
		return m, err
	}
	for c.pos < len(b) && b[c.pos] == ' ' {
		c.pos++
	}
	path := string(b[c.pos:])
	if strings.HasSuffix(path, deletedSuffix) {
		path = path[:len(path)-len(deletedSuffix)]
		m.Deleted = true
	}
	m.Path = path
	m.Kind = classify(path)
	return m, nil
}

func parsePerms(c *fieldCursor, f []byte, col int) (Perms, error) {
	if len(f) != 4 {
		return 0, c.fail(col, "permissions %q are not 4 characters", f)
	}
	var p Perms
	for i, want := range [3]byte{'r', 'w', 'x'} {
		switch f[i] {
		case want:
			p |= 1 << i
		case '-':
		default:
			return 0, c.fail(col+i, "bad permission character %q (want %q or '-')", f[i], want)
		}
	}
	switch f[3] {
	case 'p':
		p |= PermPrivate
	case 's':
	default:
		return 0, c.fail(col+3, "bad sharing character %q (want 'p' or 's')", f[3])
	}
	return p, nil
}

func classify(path string) Kind {
	switch {
	case path == "":
		return KindAnon
	case path == "[heap]":
		return KindHeap
	case path == "[stack]" || strings.HasPrefix(path, "[stack:"):
		return KindStack
	case path == "[vdso]":
		return KindVDSO
	case path == "[vvar]" || path == "[vvar_vclock]":
		return KindVVar
	case path == "[vsyscall]":
		return KindVsyscall
	case path[0] == '[' && path[len(path)-1] == ']':
		return KindPseudo
	}
	return KindFile
}

// ReadMaps reads and parses /proc/PID/maps.
func ReadMaps(pid int) ([]Mapping, error) {
	b, err := ReadMapsText(pid)
	if err != nil {
		return nil, err
	}
	ms, err := ParseMaps(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return ms, nil
}

// ReadMapsText returns /proc/PID/maps unparsed, for a caller that compares
// it with an earlier read before parsing it (an address space's Refresh).
func ReadMapsText(pid int) ([]byte, error) {
	b, err := os.ReadFile(procPath(pid, "maps"))
	if err != nil {
		return nil, fmt.Errorf("procmaps: %w", err)
	}
	return b, nil
}

func procPath(pid int, rest string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + rest
}
