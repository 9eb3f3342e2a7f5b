package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvert: folded stacks go to pprof and back with the same stacks
// and counts, --diff draws a flame graph coloured by the sign of each
// frame's change, and bad input or flags say so with their exit codes.
func TestConvert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const stacks = "main;a;hot 300\nmain;b;cold 100\nstart_thread;worker;_[k]do_syscall_64 5\n"
	in := write("in.folded", stacks)
	pb := filepath.Join(dir, "out.pb.gz")
	if r := stacktop(t, "convert", in, "-o", pb); r.code != exitConvertOK {
		t.Fatalf("folded -> pprof: exit %d\n%s", r.code, r.stderr)
	}
	r := stacktop(t, "convert", pb, "-o", "-", "--format", "folded")
	if r.code != exitConvertOK || r.stdout != stacks {
		t.Fatalf("pprof -> folded: exit %d\n%s\nwant\n%s%s", r.code, r.stdout, stacks, r.stderr)
	}

	base := write("base.folded", "main;a;hot 100\nmain;b;cold 300\n")
	svg := filepath.Join(dir, "diff.svg")
	if r := stacktop(t, "convert", in, "--diff", base, "-o", svg); r.code != exitConvertOK {
		t.Fatalf("--diff: exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<title>hot (300 samples, 74.07%, was 25.00%)</title><rect`,  // grew: red
		`<title>cold (100 samples, 24.69%, was 75.00%)</title><rect`, // shrank: blue
	} {
		i := strings.Index(string(b), want)
		if i < 0 {
			t.Fatalf("diff graph lacks %s", want)
		}
		fill := string(b[i+len(want):])
		fill = fill[strings.Index(fill, `fill="`)+6:]
		fill = fill[:strings.IndexByte(fill, '"')]
		if grew := strings.Contains(want, "hot"); grew != strings.HasPrefix(fill, "rgb(255,") || !grew != strings.HasSuffix(fill, ",255)") {
			t.Errorf("%s drawn %s", want, fill)
		}
	}

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"convert"}, exitUsage, "usage"},
		{[]string{"convert", in, "--diff", base, "-o", filepath.Join(dir, "d.pb.gz")}, exitUsage, "pprof -diff_base"},
		{[]string{"convert", write("bad.folded", "main;a\n"), "-o", filepath.Join(dir, "x.svg")}, exitConvertBadData, "line 1"},
		{[]string{"convert", filepath.Join(dir, "absent"), "-o", filepath.Join(dir, "y.svg")}, exitConvertBadData, "no such file"},
	} {
		r := stacktop(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: exit %d, want %d saying %q\n%s", tc.args, r.code, tc.code, tc.says, r.stderr)
		}
	}
}
