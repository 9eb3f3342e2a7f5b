package procmaps

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

func TestParseMapsLines(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Mapping
	}{
		{
			name: "file",
			line: "55af275b6000-55af275bc000 r-xp 00002000 fe:00 247278                     /usr/bin/head",
			want: Mapping{Start: 0x55af275b6000, End: 0x55af275bc000, Perms: PermRead | PermExec | PermPrivate,
				Offset: 0x2000, DevMajor: 0xfe, DevMinor: 0, Inode: 247278, Path: "/usr/bin/head", Kind: KindFile},
		},
		{
			name: "spaces in path",
			line: "7f0000000000-7f0000001000 r--p 00000000 08:01 12  /opt/my app/lib  x.so",
			want: Mapping{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: PermRead | PermPrivate,
				DevMajor: 8, DevMinor: 1, Inode: 12, Path: "/opt/my app/lib  x.so", Kind: KindFile},
		},
		{
			name: "deleted",
			line: "400000-401000 r-xp 00000000 103:02 99 /tmp/a.out (deleted)",
			want: Mapping{Start: 0x400000, End: 0x401000, Perms: PermRead | PermExec | PermPrivate,
				DevMajor: 0x103, DevMinor: 2, Inode: 99, Path: "/tmp/a.out", Deleted: true, Kind: KindFile},
		},
		{
			name: "deleted with spaces",
			line: "400000-401000 r-xp 00000000 103:02 99 /tmp/a b (deleted) (deleted)",
			want: Mapping{Start: 0x400000, End: 0x401000, Perms: PermRead | PermExec | PermPrivate,
				DevMajor: 0x103, DevMinor: 2, Inode: 99, Path: "/tmp/a b (deleted)", Deleted: true, Kind: KindFile},
		},
		{
			name: "anonymous, no trailing space",
			line: "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0",
			want: Mapping{Start: 0x7ffd00000000, End: 0x7ffd00021000, Perms: PermRead | PermWrite | PermPrivate, Kind: KindAnon},
		},
		{
			name: "anonymous, trailing space",
			line: "1000-2000 rwxp 00000000 00:00 0 ",
			want: Mapping{Start: 0x1000, End: 0x2000, Perms: PermRead | PermWrite | PermExec | PermPrivate, Kind: KindAnon},
		},
		{
			name: "stack",
			line: "7ffd3a1c6000-7ffd3a1e7000 rw-p 00000000 00:00 0                          [stack]",
			want: Mapping{Start: 0x7ffd3a1c6000, End: 0x7ffd3a1e7000, Perms: PermRead | PermWrite | PermPrivate, Path: "[stack]", Kind: KindStack},
		},
		{
			name: "vdso",
			line: "7ffd3a1f0000-7ffd3a1f2000 r-xp 00000000 00:00 0                          [vdso]",
			want: Mapping{Start: 0x7ffd3a1f0000, End: 0x7ffd3a1f2000, Perms: PermRead | PermExec | PermPrivate, Path: "[vdso]", Kind: KindVDSO},
		},
		{
			name: "heap", line: "5000-6000 rw-p 00000000 00:00 0 [heap]",
			want: Mapping{Start: 0x5000, End: 0x6000, Perms: PermRead | PermWrite | PermPrivate, Path: "[heap]", Kind: KindHeap},
		},
		{
			name: "vvar", line: "5000-6000 r--p 00000000 00:00 0 [vvar]",
			want: Mapping{Start: 0x5000, End: 0x6000, Perms: PermRead | PermPrivate, Path: "[vvar]", Kind: KindVVar},
		},
		{
			name: "vsyscall", line: "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]",
			want: Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: PermExec | PermPrivate, Path: "[vsyscall]", Kind: KindVsyscall},
		},
		{
			name: "named anon", line: "5000-6000 rw-p 00000000 00:00 0 [anon:jit cache]",
			want: Mapping{Start: 0x5000, End: 0x6000, Perms: PermRead | PermWrite | PermPrivate, Path: "[anon:jit cache]", Kind: KindPseudo},
		},
		{
			name: "shared memfd", line: "5000-6000 rw-s 00001000 00:01 1034 /memfd:wayland-shm (deleted)",
			want: Mapping{Start: 0x5000, End: 0x6000, Perms: PermRead | PermWrite, Offset: 0x1000, DevMinor: 1, Inode: 1034, Path: "/memfd:wayland-shm", Deleted: true, Kind: KindFile},
		},
		{
			name: "large offset", line: "5000-6000 r--s 1234567890 fd:01 18446744073709551615 /dev/x",
			want: Mapping{Start: 0x5000, End: 0x6000, Perms: PermRead, Offset: 0x1234567890, DevMajor: 0xfd, DevMinor: 1, Inode: 18446744073709551615, Path: "/dev/x", Kind: KindFile},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := ParseMaps(strings.NewReader(tt.line + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 1 {
				t.Fatalf("got %d mappings, want 1", len(ms))
			}
			if ms[0] != tt.want {
				t.Errorf("got  %+v\nwant %+v", ms[0], tt.want)
			}
		})
	}
}

func TestParseMapsErrors(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		line, col int
		msg       string
	}{
		{"empty line", "\n", 1, 1, "missing '-'"},
		{"space in start", "1000 r-xp 0 00:00 0\n", 1, 5, "bad start address"},
		{"no dash", "1000\n", 1, 5, "missing '-'"},
		{"bad start", "10g0-2000 r-xp 0 00:00 0\n", 1, 3, "bad start address"},
		{"empty end", "1000- r-xp 0 00:00 0\n", 1, 6, "empty end address"},
		{"start >= end", "2000-1000 r-xp 0 00:00 0\n", 1, 1, "not below end"},
		{"perms length", "1000-2000 r-x 0 00:00 0\n", 1, 11, "not 4 characters"},
		{"perms char", "1000-2000 rwzp 0 00:00 0\n", 1, 13, "bad permission character"},
		{"share char", "1000-2000 rwxq 0 00:00 0\n", 1, 14, "bad sharing character"},
		{"bad offset", "1000-2000 rwxp 0x10 00:00 0\n", 1, 17, "bad offset"},
		{"no colon", "1000-2000 rwxp 0 0000 0\n", 1, 24, "missing ':'"},
		{"bad inode", "1000-2000 rwxp 0 00:00 1a /x\n", 1, 25, "bad inode"},
		{"missing inode", "1000-2000 rwxp 0 00:00\n", 1, 23, "missing ' '"},
		{"huge start", "10000000000000000-10000000000000001 rwxp 0 00:00 0\n", 1, 1, "out of range"},
		{"overlap on line 2", "1000-3000 r--p 0 00:00 0\n2000-4000 r--p 0 00:00 0\n", 2, 1, "overlaps"},
		{"descending on line 3", "5000-6000 r--p 0 00:00 0\n7000-8000 r--p 0 00:00 0\n1000-2000 r--p 0 00:00 0\n", 3, 1, "overlaps or precedes"},
		{"too long", "1000-2000 r--p 0 00:00 0 /" + strings.Repeat("a", maxLine) + "\n", 1, maxLine, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMaps(strings.NewReader(tt.text))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want *ParseError", err)
			}
			if pe.Line != tt.line || pe.Col != tt.col || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("got %v (line %d col %d), want line %d col %d containing %q", pe, pe.Line, pe.Col, tt.line, tt.col, tt.msg)
			}
		})
	}
}

func TestMappingStringRoundTrip(t *testing.T) {
	ms, err := ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		again, err := ParseMaps(strings.NewReader(m.String()))
		if err != nil {
			t.Fatalf("%q: %v", m.String(), err)
		}
		if len(again) != 1 || again[0] != m {
			t.Errorf("round trip of %q gave %+v", m.String(), again)
		}
	}
}

func TestReadMapsSelf(t *testing.T) {
	ms, err := ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var sawExe, sawStack, sawVDSO bool
	for _, m := range ms {
		switch {
		case m.Path == exe && m.IsExec():
			sawExe = true
		case m.Kind == KindStack:
			sawStack = true
		case m.Kind == KindVDSO:
			sawVDSO = m.IsExec()
		}
	}
	if !sawExe || !sawStack || !sawVDSO {
		t.Errorf("own maps: executable %s mapped r-x: %v, [stack]: %v, [vdso] r-x: %v", exe, sawExe, sawStack, sawVDSO)
	}
	if _, err := ReadMaps(-1); err == nil {
		t.Error("ReadMaps(-1) succeeded")
	}
}

func FuzzParseMaps(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add([]byte("55af275b6000-55af275bc000 r-xp 00002000 fe:00 247278                     /usr/bin/head\n"))
	f.Add([]byte("400000-401000 r-xp 00000000 103:02 99 /tmp/a b (deleted)\n7ffd3a1c6000-7ffd3a1e7000 rw-p 00000000 00:00 0 [stack]\n"))
	f.Add([]byte("1000-2000 rwxp 0 00:00 0\n"))
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		// Three real lines, not the whole file: the fuzzer minimises
		// every input that finds new code, and a 4 KB seed keeps it
		// minimising instead of fuzzing.
		lines := bytes.SplitAfterN(b, []byte("\n"), 4)
		f.Add(bytes.Join(lines[:min(3, len(lines))], nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseMaps(strings.NewReader(string(b)))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error position line %d col %d", pe.Line, pe.Col)
			}
			return
		}
		for i, m := range ms {
			if m.Start >= m.End || i > 0 && m.Start < ms[i-1].End {
				t.Fatalf("mapping %d %+v breaks the order invariant", i, m)
			}
			if !m.Deleted && m.Path == "" && m.Kind != KindAnon {
				t.Fatalf("empty path classified %v", m.Kind)
			}
		}
	})
}
