package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
)

var update = flag.Bool("update", false, "rewrite testdata snapshots made from fixtures")

// drapSnapshot is TestFixtureAMD64DRAP's stack as a snapshot: only the
// window the sampler would copy, [SP, SP+N), and the fixture's .sframe.
func drapSnapshot(t testing.TB) *Snapshot {
	f, err := elf.Open(filepath.Join("..", "sframe", "testdata", "x86_64-v3-flex.exe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".sframe")
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	var text *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
		}
	}
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	s.sp = stackLow + 0xf00
	s.push(0x4000be)
	r10 := s.sp + 8
	s.sp &^= 63
	s.push(0x4000be)
	s.push(0)
	rbp := s.sp
	s.push(r10)
	s.sp -= 0x68 + 32
	s.push(0x4000fa)
	r := amd64Regs(0x400110, s.sp, rbp)
	return &Snapshot{
		Comment: "x86_64-v3-flex.exe from package sframe's testdata: _start -> drap (DRAP, flex FDE) -> g; made by drapSnapshot in snapshot_test.go",
		Regs:    r,
		Window:  SnapshotWindow{Base: s.sp, Bytes: s.mem[s.sp-s.low : s.sp-s.low+0x100]},
		Stack:   s.bounds(),
		Modules: []SnapshotModule{{
			Start: text.Vaddr, End: text.Vaddr + text.Memsz, Path: "x86_64-v3-flex.exe",
			SFrame: data, SFrameVaddr: sec.Addr,
		}},
		Expect: &SnapshotExpect{
			PCs:      []uint64{0x400110, 0x4000fa, 0x4000be},
			Methods:  []string{"regs", "sframe", "sframe"},
			Complete: true,
		},
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	snap := drapSnapshot(t)
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join("testdata", "amd64-drap.snapshot.json"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Regs != snap.Regs || !bytes.Equal(got.Window.Bytes, snap.Window.Bytes) || len(got.Modules) != 1 {
		t.Fatalf("round trip changed the snapshot")
	}
	st, err := got.Walk(Options{NoFramePointer: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Check(st); err != nil {
		t.Error(err)
	}
	// Check must be able to fail.
	got.Expect.PCs[1]++
	if got.Check(st) == nil {
		t.Error("Check accepted a wrong PC")
	}
}

// TestReplaySnapshots replays every snapshot under testdata (saved by
// integration tests from live captures, or made from fixtures) and
// compares with the result recorded in it.
func TestReplaySnapshots(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.snapshot.json"))
	if len(files) == 0 {
		t.Fatal("no testdata/*.snapshot.json")
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			snap, err := ReadSnapshot(f)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Expect == nil {
				t.Fatal("snapshot has no expected result")
			}
			st, err := snap.Walk(Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := snap.Check(st); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestReadSnapshotRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not json":      "{",
		"no arch":       `{"regs":{"Arch":0}}`,
		"empty module":  `{"regs":{"Arch":1},"modules":[{"start":16,"end":16}]}`,
		"expect shape":  `{"regs":{"Arch":1},"expect":{"pcs":[1],"methods":[]}}`,
		"bad arch type": `{"regs":{"Arch":"amd64"}}`,
	} {
		if _, err := ReadSnapshot(bytes.NewBufferString(in)); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: err = %v, want ErrSnapshot", name, err)
		}
	}
	// A corrupt .sframe is reported by ModuleList, not silently dropped.
	snap := drapSnapshot(t)
	snap.Modules[0].SFrame = snap.Modules[0].SFrame[:10]
	if _, err := snap.Walk(Options{}); !errors.Is(err, ErrSnapshot) {
		t.Errorf("truncated .sframe: err = %v", err)
	}
}

// FuzzReadSnapshot: any bytes either fail to read with ErrSnapshot or give
// a snapshot whose replay ends without panicking.
func FuzzReadSnapshot(f *testing.F) {
	fuzzbudget.Limit(f)
	// Only a small seed: a whole captured snapshot (kilobytes of JSON
	// with its .sframe) kept the fuzzer minimising (cost quadratic in the
	// input's size) instead of fuzzing; the replay tests cover it.
	f.Add([]byte(`{"regs":{"Arch":3,"PC":16,"R":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,64],"Valid":32768},"window":{"base":64,"bytes":"AAAAAAAAAAA="},"modules":[{"start":0,"end":4096}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("err %v is not ErrSnapshot", err)
			}
			return
		}
		st, err := snap.Walk(Options{MaxDepth: 64})
		if err == nil && len(st.Frames) == 0 {
			t.Fatal("walk returned no frames")
		}
	})
}
