package debuginfo

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// lookupAll checks l against want (frames by PC).
func lookupAll(t *testing.T, l *Lines, want map[uint64][]Frame) {
	t.Helper()
	for pc, w := range want {
		got, err := l.Frames(pc, nil)
		if err != nil {
			t.Fatalf("%#x: %v", pc, err)
		}
		if !slices.Equal(got, w) {
			t.Fatalf("%#x:\n got  %+v\n want %+v", pc, got, w)
		}
	}
}

func referenceFrames(t *testing.T, f *elf.File, pcs []uint64) map[uint64][]Frame {
	l, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]Frame{}
	for _, pc := range pcs {
		want[pc], _ = l.Frames(pc, nil)
	}
	return want
}

// TestCacheLibc: a second run reads libc's units from the cache instead of
// decompressing them, with the same answers; a corrupt, truncated or
// foreign cache file is ignored, never believed.
func TestCacheLibc(t *testing.T) {
	t.Parallel()
	_, df, _ := openLibcDebug(t)
	if s := df.File.Section(".debug_info"); s == nil || s.Flags&elf.SHF_COMPRESSED == 0 {
		t.Skip("libc's debug file is not compressed here: nothing to cache")
	}
	pcs := funcPCs(t, df.File, 40)
	want := referenceFrames(t, df.File, pcs)
	c := &Cache{Dir: t.TempDir()}

	first, err := NewLinesCached(df.File, c)
	if err != nil {
		t.Fatal(err)
	}
	lookupAll(t, first, want)
	if err := first.SaveCache(); err != nil {
		t.Fatal(err)
	}
	id := objectBuildID(df.File)
	infoPath := filepath.Join(c.Dir, id, "debug_info")
	if _, err := os.Stat(infoPath); err != nil {
		t.Fatalf("no cache file: %v", err)
	}

	second, err := NewLinesCached(df.File, c)
	if err != nil {
		t.Fatal(err)
	}
	lookupAll(t, second, want)
	if second.lazy.info.cachedLen == 0 || second.lazy.info.r != nil {
		t.Errorf("second run decompressed .debug_info again (cached %d bytes)", second.lazy.info.cachedLen)
	}

	if !second.lazy.info.mapped {
		t.Errorf("second run's .debug_info is not the mapped cache file")
	}
	real, err := df.File.Section(".debug_info").Data()
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(infoPath)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func([]byte) []byte{
		"flipped data byte":   func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
		"flipped last byte":   func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b },
		"flipped block sum":   func(b []byte) []byte { b[cacheHeaderLen] ^= 1; return b },
		"truncated":           func(b []byte) []byte { return b[:len(b)-100] },
		"other section's key": func(b []byte) []byte { b[len(cacheMagic)] ^= 1; return b },
		"empty":               func(b []byte) []byte { return nil },
		"longer than stated":  func(b []byte) []byte { return append(b, 0) },
	}
	for name, hurt := range damage {
		if err := os.WriteFile(infoPath, hurt(slices.Clone(good)), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := NewLinesCached(df.File, c)
		if err != nil {
			t.Fatal(err)
		}
		lookupAll(t, l, want)
		// A damaged block the lookups did not reach is caught once a
		// read reaches it: the whole section then matches the file's.
		all, err := l.lazy.info.all()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(all, real) {
			t.Errorf("%s: section bytes differ from the file's", name)
		}
		if l.lazy.info.cachedLen != 0 {
			t.Errorf("%s: cache file believed", name)
		}
	}
}

// TestCacheConcurrent: runs that read and write one cache at the same
// time all give the reference answers.
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	_, df, p := openLibcDebug(t)
	pcs := funcPCs(t, df.File, 60)
	want := referenceFrames(t, df.File, pcs)
	c := &Cache{Dir: t.TempDir()}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each run opens the file itself, as separate processes would.
			f, err := openDebugOf(p)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for round := 0; round < 3; round++ {
				l, err := NewLinesCached(f, c)
				if err != nil {
					t.Error(err)
					return
				}
				// Different runs reach different depths of the sections.
				for i := g; i < len(pcs); i += 1 + g + round {
					got, _ := l.Frames(pcs[i], nil)
					if !slices.Equal(got, want[pcs[i]]) {
						t.Errorf("run %d round %d %#x: %+v, want %+v", g, round, pcs[i], got, want[pcs[i]])
						return
					}
				}
				l.SaveCache()
			}
		}()
	}
	wg.Wait()
	leftovers, _ := filepath.Glob(filepath.Join(c.Dir, "*", ".tmp-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// openDebugOf opens the separate debug file of the object at p.
func openDebugOf(p string) (*elf.File, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	id := objectBuildID(f)
	df, err := Locator{}.Find(p, f, id)
	if err != nil {
		return nil, err
	}
	return df.File, nil
}

// flippedAt is an io.ReaderAt of r with the byte at off inverted.
type flippedAt struct {
	r   io.ReaderAt
	off int64
}

// Identity is r's file's, which the key takes.
func (f flippedAt) Identity() (dev, ino, ctimeNS uint64) {
	return f.r.(interface {
		Identity() (uint64, uint64, uint64)
	}).Identity()
}

func (f flippedAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(b, off)
	if f.off >= off && f.off < off+int64(n) {
		b[f.off-off] ^= 0xff
	}
	return n, err
}

// TestCacheKeyStoredBytes: the key of a compressed section sums the first
// bytes as stored in the file, read without inflating them: one changed
// byte among them (another compression of the same build) is another key,
// and a section not read from a file is not cached (it has no identity).
func TestCacheKeyStoredBytes(t *testing.T) {
	t.Parallel()
	_, df, _ := openLibcDebug(t)
	sec := df.File.Section(".debug_info")
	if sec == nil || sec.Flags&elf.SHF_COMPRESSED == 0 {
		t.Skip("libc's debug file is not compressed here: no key to check")
	}
	raw := rawFile(df.File)
	if raw == nil {
		t.Fatal("no file bytes found behind the debug file's sections")
	}
	c := &Cache{Dir: t.TempDir()}
	key := c.cacheFor(sec, raw, "id").key
	if again := c.cacheFor(sec, raw, "id").key; again != key {
		t.Fatalf("key changed between two calls: %+v, %+v", key, again)
	}
	if other := c.cacheFor(sec, flippedAt{raw, int64(sec.Offset) + 100}, "id").key; other == key {
		t.Errorf("a changed stored byte kept the key %+v", key)
	}
	if past := c.cacheFor(sec, flippedAt{raw, int64(sec.Offset) + 5000}, "id").key; past != key {
		t.Errorf("a byte past the summed head changed the key: %+v, %+v", key, past)
	}
	if inMemory := c.cacheFor(sec, bytes.NewReader(nil), "id"); inMemory != nil {
		t.Errorf("a section not read from a file is cached, as %+v", inMemory.key)
	}
}
