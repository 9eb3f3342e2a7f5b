package debuginfo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

func TestParseDebugLink(t *testing.T) {
	t.Parallel()
	b := append([]byte("libc.so.6.debug\x00"), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[16:], 0xdeadbeef)
	got, err := ParseDebugLink(b, binary.LittleEndian)
	if err != nil || got.Name != "libc.so.6.debug" || got.CRC32 != 0xdeadbeef {
		t.Fatalf("got %+v, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"no NUL":    []byte("abc"),
		"empty":     {0, 0, 0, 0, 1, 2, 3, 4},
		"truncated": []byte("ab\x00\x00\x01\x02"),
		"slash":     []byte("../x\x00\x00\x00\x00\x01\x02\x03\x04"),
	} {
		var fe *FormatError
		if _, err := ParseDebugLink(bad, binary.LittleEndian); !errors.As(err, &fe) {
			t.Errorf("%s: err %v, want *FormatError", name, err)
		}
	}
}

// TestDebugLinkObjcopy strips a binary with objcopy --add-gnu-debuglink
// and checks the link is found next to it, CRC verified, and that a
// corrupted debug file is rejected.
func TestDebugLinkObjcopy(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("objcopy"); err != nil {
		t.Skip("objcopy not installed")
	}
	bin := buildCXX(t)
	dir := filepath.Dir(bin)
	dbg := filepath.Join(dir, "inline.debug")
	for _, args := range [][]string{
		{"--only-keep-debug", bin, dbg},
		{"--strip-debug", "--strip-unneeded", bin},
		{"--add-gnu-debuglink=" + dbg, bin},
	} {
		if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	f, err := openELF(bin)
	if err != nil {
		t.Fatal(err)
	}
	link, err := ReadDebugLink(f)
	if err != nil || link.Name != "inline.debug" {
		t.Fatalf("link %+v, %v", link, err)
	}
	raw, _ := os.ReadFile(dbg)
	if link.CRC32 != crc32.ChecksumIEEE(raw) {
		t.Fatalf("CRC %08x, file %08x", link.CRC32, crc32.ChecksumIEEE(raw))
	}
	loc := Locator{DebugDirs: []string{t.TempDir()}}
	df, err := loc.Find(bin, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if df.Via != "debuglink" || df.Path != dbg {
		t.Errorf("found %s via %s", df.Path, df.Via)
	}
	if _, err := NewLines(df.File); err != nil {
		t.Errorf("debug file has no usable DWARF: %v", err)
	}
	df.Close()

	raw[len(raw)-1] ^= 0xff
	os.WriteFile(dbg, raw, 0o644)
	if df, err := loc.Find(bin, f, ""); err == nil {
		df.Close()
		t.Fatal("corrupted debug file accepted")
	} else if !errors.Is(err, ErrNotFound) || !bytes.Contains([]byte(err.Error()), []byte("CRC32")) {
		t.Errorf("err %v, want ErrNotFound mentioning CRC32", err)
	}
}

func FuzzDebugLink(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add([]byte("libc.so.6.debug\x00\x01\x02\x03\x04"))
	f.Add([]byte("a\x00\x00\x00\x01\x02\x03\x04"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseDebugLink(b, binary.LittleEndian)
		if err == nil && (l.Name == "" || bytes.ContainsAny([]byte(l.Name), "/\x00")) {
			t.Fatalf("accepted bad name %q", l.Name)
		}
	})
}
