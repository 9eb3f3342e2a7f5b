package export

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// TestFoldedPprofRoundTrip: folded stacks, written as pprof and read
// back, give the same stacks and counts; so does pprof written by record
// (knownSplit), read and written as folded.
func TestFoldedPprofRoundTrip(t *testing.T) {
	const in = "main;a;hot 300\nmain;b;cold 100\nmain;b 7\nmain;a;hot;[unknown];0x7f00 2\nstart_thread;worker;_[k]do_syscall_64 5\n"
	p, f, err := Read(strings.NewReader(in))
	if err != nil || f != FormatFolded {
		t.Fatalf("Read: %v, %v", f, err)
	}
	var pb bytes.Buffer
	if err := WritePprof(&pb, p); err != nil {
		t.Fatal(err)
	}
	back, f, err := Read(&pb)
	if err != nil || f != FormatPprof {
		t.Fatalf("Read of the pprof: %v, %v", f, err)
	}
	var out bytes.Buffer
	if err := WriteFolded(&out, back, FoldedOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := parseFolded(t, out.String()), parseFolded(t, in); !maps.Equal(got, want) {
		t.Errorf("folded -> pprof -> folded:\n got  %v\n want %v", got, want)
	}

	pb.Reset()
	if err := WritePprof(&pb, knownSplit()); err != nil {
		t.Fatal(err)
	}
	fromPprof, _, err := Read(&pb)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	WriteFolded(&a, knownSplit(), FoldedOptions{ThreadRoot: true})
	WriteFolded(&b, fromPprof, FoldedOptions{ThreadRoot: true})
	if a.String() != b.String() {
		t.Errorf("record's pprof read back as\n%s\nwant\n%s", b.String(), a.String())
	}
	if fromPprof.PID != 42 || fromPprof.Command != "fixture --arg" || fromPprof.Period != knownSplit().Period {
		t.Errorf("read back pid %d command %q period %v", fromPprof.PID, fromPprof.Command, fromPprof.Period)
	}
}

func TestReadFoldedErrors(t *testing.T) {
	for _, bad := range []string{"main;a\n", "main;a x\n", "main;a -3\n", "main;;a 1\n", "main 99999999999\n"} {
		var re *ReadError
		if _, err := ReadFolded(strings.NewReader(bad)); !errors.As(err, &re) || re.Line != 1 {
			t.Errorf("ReadFolded(%q) = %v, want a *ReadError at line 1", bad, err)
		}
	}
	if _, _, err := Read(strings.NewReader("\x1f\x8bnot gzip")); err == nil {
		t.Error("a broken gzip stream was read")
	}
}

// FuzzRead: any bytes read as a profile give one or an error, never a
// panic, and what is read can be written in every format.
func FuzzRead(f *testing.F) {
	f.Add([]byte("main;a;hot 3\nmain;b 1\n"))
	var pb bytes.Buffer
	WritePprof(&pb, knownSplit())
	f.Add(pb.Bytes())
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01})
	fuzzbudget.Limit(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, format := range []Format{FormatPprof, FormatFolded, FormatSpeedscope, FormatSVG} {
			if err := WriteOptions(&bytes.Buffer{}, p, format, Options{}); err != nil {
				t.Fatalf("%v: %v", format, err)
			}
		}
	})
}

// TestReadUncompressedPprof: a pprof file written without gzip starts
// with a newline byte (its first field's tag) and is still read as pprof;
// a sample count no profile holds is refused, not expanded.
func TestReadUncompressedPprof(t *testing.T) {
	var raw bytes.Buffer
	if err := BuildPprof(knownSplit()).WriteUncompressed(&raw); err != nil {
		t.Fatal(err)
	}
	if raw.Bytes()[0] != '\n' {
		t.Fatalf("uncompressed pprof starts with %#x", raw.Bytes()[0])
	}
	p, f, err := Read(bytes.NewReader(raw.Bytes()))
	if err != nil || f != FormatPprof || p.Samples != 400 {
		t.Fatalf("Read: %v, %v (%d samples)", f, err, p.Samples)
	}
	big := BuildPprof(knownSplit())
	big.Sample[0].Value[0] = 1 << 62
	raw.Reset()
	big.WriteUncompressed(&raw)
	var re *ReadError
	if _, _, err := Read(bytes.NewReader(raw.Bytes())); !errors.As(err, &re) {
		t.Errorf("a count of 2^62: %v, want a *ReadError", err)
	}
}
