package procmaps

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

// dirent encodes one linux_dirent64 record as getdents64 writes it.
func dirent(name string) []byte {
	reclen := (direntHeader + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b, 42) // d_ino
	binary.NativeEndian.PutUint64(b[8:], 7)
	binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
	b[18] = 4 // DT_DIR
	copy(b[direntHeader:], name)
	return b
}

func dirents(names ...string) []byte {
	var b []byte
	for _, n := range names {
		b = append(b, dirent(n)...)
	}
	return b
}

func TestParseTaskDirents(t *testing.T) {
	buf := dirents(".", "..", "1234", "1", "4194304", "2147483647", "2147483648", "0", "012", "12a", "")
	got, err := ParseTaskDirents(buf, []int{9})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{9, 1234, 1, 4194304, 2147483647}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseTaskDirentsErrors(t *testing.T) {
	good := dirents("10", "11")
	noNUL := dirent("12345")
	for i := direntHeader; i < len(noNUL); i++ {
		noNUL[i] = '7'
	}
	short := dirent("13")
	binary.NativeEndian.PutUint16(short[16:], direntHeader)
	long := dirent("14")
	binary.NativeEndian.PutUint16(long[16:], 200)
	for _, c := range []struct {
		name string
		buf  []byte
		off  int
	}{
		{"truncated header", append(slices.Clone(good), 1, 2, 3), len(good)},
		{"truncated record", append(slices.Clone(good), dirent("1500000")[:28]...), len(good)},
		{"no NUL", append(slices.Clone(good), noNUL...), len(good)},
		{"record too short", append(slices.Clone(good), short...), len(good)},
		{"record past the end", append(slices.Clone(good), long...), len(good)},
	} {
		tids, err := ParseTaskDirents(c.buf, nil)
		var de *DirentError
		if !errors.As(err, &de) || de.Off != c.off {
			t.Errorf("%s: %v, want a *DirentError at offset %d", c.name, err, c.off)
		}
		if !slices.Equal(tids, []int{10, 11}) {
			t.Errorf("%s: records before the bad one gave %v", c.name, tids)
		}
	}
}

// TestThreadsMatchesReadDir: Threads lists what os.ReadDir lists, for a
// process with more threads than one getdents call of os.ReadDir holds.
func TestThreadsMatchesReadDir(t *testing.T) {
	for range 300 {
		lockedThread(t, func(stop <-chan struct{}) { <-stop })
	}
	pid := os.Getpid()
	got, err := Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			want = append(want, tid)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Threads: %d TIDs %v\nos.ReadDir: %d TIDs %v", len(got), got, len(want), want)
	}
	if _, err := Threads(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Threads of no process: %v, want ErrNotExist", err)
	}
}

func FuzzParseTaskDirents(f *testing.F) {
	fuzzbudget.Limit(f)
	f.Add(dirents(".", "..", "1", "77", "4194304"))
	f.Add(dirents("0", "00", "99999999999", "-1"))
	f.Add(dirent("5")[:20])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, buf []byte) {
		tids, err := ParseTaskDirents(buf, nil)
		for _, tid := range tids {
			if tid <= 0 {
				t.Fatalf("TID %d", tid)
			}
		}
		var de *DirentError
		if err != nil && (!errors.As(err, &de) || de.Off < 0 || de.Off >= len(buf)) {
			t.Fatalf("error %v", err)
		}
		if err == nil {
			// What parses back from the TIDs' own records is the same.
			var names []string
			for _, tid := range tids {
				names = append(names, strconv.Itoa(tid))
			}
			again, err := ParseTaskDirents(dirents(names...), nil)
			if err != nil || !slices.Equal(again, tids) {
				t.Fatalf("re-encoded: %v, %v; first %v", again, err, tids)
			}
		}
	})
}
