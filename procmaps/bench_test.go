package procmaps

import (
	"bytes"
	"os"
	"testing"
)

func BenchmarkParseMapsSelf(b *testing.B) {
	raw, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ParseMaps(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseStat(b *testing.B) {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ParseStat(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadThreadInfo(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := ReadThreadInfo(pid, pid); err != nil {
			b.Fatal(err)
		}
	}
}
