package debuginfo

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// legacyLines indexes f the way NewLines did before .debug_aranges was
// used: every section whole, every unit's ranges read up front.
func legacyLines(t testing.TB, f *elf.File) *Lines {
	t.Helper()
	d, err := loadDWARF(f)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLinesFromDWARF(d)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// compareLazy checks that the lazy index gives every PC the same frames
// as reading the whole DWARF.
func compareLazy(t *testing.T, f *elf.File, pcs []uint64) {
	t.Helper()
	start := time.Now()
	lazy, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	if lazy.lazy == nil {
		t.Fatal("NewLines did not index from .debug_aranges")
	}
	lazyIndex := time.Since(start)
	start = time.Now()
	whole := legacyLines(t, f)
	wholeIndex := time.Since(start)
	t.Logf("index: lazy %v, whole %v; %d aranges ranges, %d unit ranges", lazyIndex, wholeIndex, lazy.Units(), whole.Units())
	withLines, bad := 0, 0
	for _, pc := range pcs {
		a, errA := lazy.Frames(pc, nil)
		b, errB := whole.Frames(pc, nil)
		if (errA == nil) != (errB == nil) {
			t.Errorf("%#x: lazy error %v, whole error %v", pc, errA, errB)
		}
		if len(b) > 0 && b[len(b)-1].Line > 0 {
			withLines++
		}
		if !slices.Equal(a, b) {
			t.Errorf("%#x:\n lazy  %+v\n whole %+v", pc, a, b)
			if bad++; bad > 10 {
				t.Fatal("too many differences")
			}
		}
	}
	if withLines < len(pcs)/2 {
		t.Errorf("only %d of %d PCs have lines: the comparison proves little", withLines, len(pcs))
	}
	t.Logf("%d PCs, %d with lines", len(pcs), withLines)
}

// funcPCs returns, for each function symbol of f, its start and middle.
func funcPCs(t *testing.T, f *elf.File, limit int) []uint64 {
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var pcs []uint64
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
			continue
		}
		pcs = append(pcs, s.Value, s.Value+s.Size/2)
	}
	slices.Sort(pcs)
	pcs = slices.Compact(pcs)
	if len(pcs) > limit {
		step := len(pcs) / limit
		var picked []uint64
		for i := 0; i < len(pcs); i += step {
			picked = append(picked, pcs[i])
		}
		pcs = picked
	}
	return pcs
}

// TestLazyLinesLibc compares the lazy index of libc's debug file (zlib
// compressed sections in Debian's libc6-dbg) with the whole one.
func TestLazyLinesLibc(t *testing.T) {
	t.Parallel()
	_, df, _ := openLibcDebug(t)
	compareLazy(t, df.File, funcPCs(t, df.File, 3000))
}

// TestLazyLinesCXX does the same on fresh g++ output, every byte of the
// inline-heavy function.
func TestLazyLinesCXX(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(buildCXX(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcs := funcAddrs(t, f, "_ZN4demo3runERKSt6vectorIlSaIlEEl", "main")
	compareLazy(t, f, append(pcs, funcPCs(t, f, 1000)...))
}

// TestParseArangesErrors feeds truncated and malformed tables.
func TestParseArangesErrors(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	good := le.AppendUint32(nil, 44)
	good = le.AppendUint16(good, 2)
	good = le.AppendUint32(good, 0x1234) // debug_info offset
	good = append(good, 8, 0)
	good = append(good, 0, 0, 0, 0) // pad to 16
	good = le.AppendUint64(good, 0x1000)
	good = le.AppendUint64(good, 0x20)
	good = le.AppendUint64(good, 0)
	good = le.AppendUint64(good, 0)
	got, err := parseAranges(good, le)
	if err != nil || len(got) != 1 || got[0] != (unitRange{0x1000, 0x1020, 0x1234}) {
		t.Fatalf("good table: %v %v", got, err)
	}
	for n := 1; n < len(good); n++ {
		if _, err := parseAranges(good[:n], le); err == nil && n < 12 {
			t.Errorf("truncated to %d bytes: no error", n)
		}
	}
	bad := append([]byte(nil), good...)
	bad[4] = 7 // version
	if _, err := parseAranges(bad, le); err == nil {
		t.Error("version 7 accepted")
	}
}

// FuzzAranges: any bytes give ranges or an error, never a panic.
func FuzzAranges(f *testing.F) {
	f.Add([]byte{44, 0, 0, 0, 2, 0, 0x34, 0x12, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			rs, err := parseAranges(b, order)
			for _, r := range rs {
				if r.lo >= r.hi {
					t.Fatalf("empty range %+v (err %v)", r, err)
				}
			}
		}
	})
}

// TestFramesNoWait: the first lookup in a unit does not wait for it and
// says so; once the unit is decoded the frames are Frames'.
func TestFramesNoWait(t *testing.T) {
	t.Parallel()
	_, df, _ := openLibcDebug(t)
	pcs := funcPCs(t, df.File, 20)
	l, err := NewLines(df.File)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewLines(df.File)
	if err != nil {
		t.Fatal(err)
	}
	notReady := 0
	for _, pc := range pcs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, ready, err := l.FramesNoWait(pc, nil)
			if !ready {
				if len(got) != 0 || err != nil {
					t.Fatalf("%#x: not ready, yet frames %v error %v", pc, got, err)
				}
				notReady++
				if time.Now().After(deadline) {
					t.Fatalf("%#x: unit never decoded", pc)
				}
				time.Sleep(time.Millisecond)
				continue
			}
			want, werr := ref.Frames(pc, nil)
			if !slices.Equal(got, want) || (err == nil) != (werr == nil) {
				t.Fatalf("%#x: FramesNoWait %v %v, Frames %v %v", pc, got, err, want, werr)
			}
			break
		}
	}
	if notReady == 0 {
		t.Error("every lookup was ready at once: the test proves nothing")
	}
}

// TestLazyInMadeELF: the ELF the fuzz target builds around DWARF sections
// gives the same frames as the compiler's file, so the fuzzer's seed runs
// the whole lazy path.
func TestLazyInMadeELF(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(buildCXX(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	secs := map[string][]byte{}
	for _, name := range []string{".debug_aranges", ".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str", ".debug_rnglists"} {
		if s := f.Section(name); s != nil {
			secs[name], _ = s.Data()
		}
	}
	made, err := elf.NewFile(bytes.NewReader(elfWithSections(secs)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewLines(made)
	if err != nil || a.lazy == nil {
		t.Fatalf("made ELF: %v (lazy %v)", err, a != nil && a.lazy != nil)
	}
	b, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pc := range funcAddrs(t, f, "main") {
		x, _ := a.Frames(pc, nil)
		y, _ := b.Frames(pc, nil)
		if !slices.Equal(x, y) {
			t.Fatalf("%#x: made %+v, compiled %+v", pc, x, y)
		}
		n += len(x)
	}
	if n == 0 {
		t.Fatal("no frames at all")
	}
}

// TestLazyLinesCXXDwarf4: the same with DWARF 4 (unit headers, .debug_ranges,
// string forms of another version) and code split over sections, so the
// unit's ranges are a list.
func TestLazyLinesCXXDwarf4(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("g++ not installed")
	}
	bin := filepath.Join(t.TempDir(), "inline4")
	out, err := exec.Command("g++", "-O2", "-gdwarf-4", "-ffunction-sections", "-o", bin, "testdata/inline.cc").CombinedOutput()
	if err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".debug_ranges") == nil {
		t.Fatal("no .debug_ranges: the test no longer covers DWARF 4 range lists")
	}
	pcs := funcAddrs(t, f, "_ZN4demo3runERKSt6vectorIlSaIlEEl", "main")
	compareLazy(t, f, append(pcs, funcPCs(t, f, 1000)...))
}

// TestLazyLinesCompressed: SHF_COMPRESSED sections (zlib, and zstd where
// the toolchain writes it) read as far as needed give the frames the
// whole sections give.
func TestLazyLinesCompressed(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("g++ not installed")
	}
	for _, kind := range []string{"zlib", "zstd"} {
		t.Run(kind, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "inline-"+kind)
			out, err := exec.Command("g++", "-O2", "-g", "-gz="+kind, "-o", bin, "testdata/inline.cc").CombinedOutput()
			if err != nil {
				t.Skipf("g++ -gz=%s: %v\n%s", kind, err, out)
			}
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if s := f.Section(".debug_info"); s == nil || s.Flags&elf.SHF_COMPRESSED == 0 {
				t.Skipf("-gz=%s left .debug_info uncompressed", kind)
			}
			pcs := funcAddrs(t, f, "_ZN4demo3runERKSt6vectorIlSaIlEEl", "main")
			compareLazy(t, f, append(pcs, funcPCs(t, f, 1000)...))
		})
	}
}

// TestMapUncompressed: an uncompressed section of an object opened from a
// file is mapped whole, with the file's bytes; one of an object in memory
// is read as a stream, with the same bytes.
func TestMapUncompressed(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("g++ not installed")
	}
	bin := filepath.Join(t.TempDir(), "inline")
	if out, err := exec.Command("g++", "-O2", "-g", "-o", bin, "testdata/inline.cc").CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".debug_info", ".debug_line", ".debug_aranges"} {
		sec := f.Section(name)
		if sec == nil || sec.Flags&elf.SHF_COMPRESSED != 0 {
			t.Fatalf("%s missing or compressed", name)
		}
		want, err := sec.Data()
		if err != nil {
			t.Fatal(err)
		}
		s := newLazySection(f, name)
		if !s.done || !bytes.Equal(s.buf, want) {
			t.Errorf("%s: not mapped with the file's bytes (done %v, %d bytes, want %d)", name, s.done, len(s.buf), len(want))
		}
		m := newLazySection(mem, name)
		if m.done {
			t.Errorf("%s of an object in memory was mapped", name)
		}
		if got, err := m.all(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in memory: %d bytes, %v", name, len(got), err)
		}
	}
}

// TestLazyLinesAfterCallSites: a unit whose call sites were read first
// (opened without its line program, which leaves the program's offset
// for the next open) gives the same frames as reading the whole DWARF.
func TestLazyLinesAfterCallSites(t *testing.T) {
	t.Parallel()
	_, df, _ := openLibcDebug(t)
	lazy, err := NewLines(df.File)
	if err != nil {
		t.Fatal(err)
	}
	if lazy.lazy == nil {
		t.Fatal("NewLines did not index from .debug_aranges")
	}
	cs, err := NewCallSitesFromLines(lazy)
	if err != nil && cs == nil {
		t.Fatal(err)
	}
	whole := legacyLines(t, df.File)
	pcs := funcPCs(t, df.File, 400)
	for _, pc := range pcs {
		cs.At(pc + 1) // the unit holding pc, without lines
	}
	lazy.lazy.stmtMu.Lock()
	known := len(lazy.lazy.stmts)
	lazy.lazy.stmtMu.Unlock()
	if known == 0 {
		t.Fatal("reading call sites left no unit's line program offset")
	}
	withLines := 0
	for _, pc := range pcs {
		a, errA := lazy.Frames(pc, nil)
		b, errB := whole.Frames(pc, nil)
		if (errA == nil) != (errB == nil) || !slices.Equal(a, b) {
			t.Fatalf("%#x:\n lazy  %+v (%v)\n whole %+v (%v)", pc, a, errA, b, errB)
		}
		if len(b) > 0 && b[len(b)-1].Line > 0 {
			withLines++
		}
	}
	if withLines < len(pcs)/2 {
		t.Errorf("only %d of %d PCs have lines: the comparison proves little", withLines, len(pcs))
	}
	t.Logf("%d PCs, %d with lines, %d units' line programs known from their call sites", len(pcs), withLines, known)
}
