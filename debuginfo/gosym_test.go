package debuginfo

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const goProgram = `package main

import "fmt"

//go:noinline
func work(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

func main() { fmt.Println(work(1000)) }
`

// TestGoTable builds a Go program with DWARF stripped and compares every
// sampled address of its main package with go tool addr2line.
func TestGoTable(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(goProgram), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gotarget\n\ngo 1.21\n"), 0o644)
	bin := filepath.Join(dir, "gotarget")
	cmd := exec.Command(goTool, "build", "-ldflags=-w", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := NewLines(f); err != ErrNoDWARF {
		t.Fatalf("NewLines on a -w binary: %v, want ErrNoDWARF", err)
	}
	g, err := NewGoTable(f)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == "main.work" || s.Name == "main.main" || s.Name == "fmt.Fprintln" {
			for a := s.Value; a < s.Value+s.Size; a += 5 {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		t.Fatal("no main package symbols")
	}
	var in bytes.Buffer
	for _, a := range addrs {
		fmt.Fprintf(&in, "%#x\n", a)
	}
	a2l := exec.Command(goTool, "tool", "addr2line", bin)
	a2l.Stdin = &in
	out, err := a2l.Output()
	if err != nil {
		t.Fatalf("go tool addr2line: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		name := sc.Text()
		if !sc.Scan() || i >= len(addrs) {
			t.Fatal("short go tool addr2line output")
		}
		loc := sc.Text()
		colon := strings.LastIndexByte(loc, ':')
		line, _ := strconv.Atoi(loc[colon+1:])
		got, ok := g.Frame(addrs[i])
		if !ok || got.Function != name || got.File != loc[:colon] || got.Line != line {
			t.Errorf("%#x: %s %s:%d, go tool addr2line %s %s", addrs[i], got.Function, got.File, got.Line, name, loc)
		}
	}
}

// BenchmarkFrames measures a cached lookup (unit already decoded) of a PC
// with a four-deep inline chain.
func BenchmarkFramesCached(b *testing.B) {
	bin := buildCXX(b)
	f, err := elf.Open(bin)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	l, err := NewLines(f)
	if err != nil {
		b.Fatal(err)
	}
	pcs := make([]uint64, 0)
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == "_ZN4demo3runERKSt6vectorIlSaIlEEl" {
			for a := s.Value; a < s.Value+s.Size; a++ {
				pcs = append(pcs, a)
			}
		}
	}
	var buf []Frame
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf, _ = l.Frames(pcs[i%len(pcs)], buf[:0])
	}
}

// BenchmarkIndexLibc measures NewLines on libc's debug file (unit ranges
// only) and the first lookup of one PC (decoding its unit).
func BenchmarkIndexLibc(b *testing.B) {
	_, df, _ := openLibcDebug(b)
	for i := 0; i < b.N; i++ {
		l, err := NewLines(df.File)
		if err != nil {
			b.Fatal(err)
		}
		l.Frames(l.units[len(l.units)/2].lo, nil)
	}
}
