package debuginfo

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
	"codeberg.org/stacktop/stacktop/symbols"
)

// testSymbolTable is the symbol table of the machine's C library (any
// ELF object with symbols will do).
func testSymbolTable(t testing.TB) *symbols.Table {
	exe := libcPath(t)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := symbols.Load(f)
	if err != nil || tab.Len() == 0 {
		t.Fatalf("symbols of %s: %d, %v", exe, tab.Len(), err)
	}
	return tab
}

const testBuildID = "0123456789abcdef"

// TestObjectCache: a stored payload reads back equal under its build ID,
// kind and key, and under no other; a file damaged anywhere, cut short or
// grown is not believed.
func TestObjectCache(t *testing.T) {
	t.Parallel()
	enc, err := testSymbolTable(t).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: t.TempDir()}
	load := func(id, kind, key string) bool {
		got, ok := c.Load(id, kind, key)
		if ok && !slices.Equal(got, enc) {
			t.Fatalf("%s/%s under %q: read back other bytes", id, kind, key)
		}
		return ok
	}
	if load(testBuildID, "symtab", "k1") {
		t.Fatal("a payload from an empty cache")
	}
	if err := c.Store(testBuildID, "symtab", "k1", enc); err != nil {
		t.Fatal(err)
	}
	if !load(testBuildID, "symtab", "k1") {
		t.Fatal("stored payload not read back")
	}
	if load(testBuildID, "symtab", "k2") {
		t.Error("a payload built from other files was believed (key k2)")
	}
	if load(testBuildID, "funcs", "k1") {
		t.Error("another kind's payload")
	}
	if load("fedcba9876543210", "symtab", "k1") {
		t.Error("another build ID's payload")
	}
	for _, id := range []string{"../x", "AB12", "", "a"} {
		if err := c.Store(id, "symtab", "k1", enc); err != nil || load(id, "symtab", "k1") {
			t.Errorf("build ID %q: stored or read (%v); want it ignored", id, err)
		}
	}
	for _, kind := range []string{"../symtab", "", "Sym"} {
		if err := c.Store(testBuildID, kind, "k1", enc); err != nil || load(testBuildID, kind, "k1") {
			t.Errorf("kind %q: stored or read (%v); want it ignored", kind, err)
		}
	}

	path := filepath.Join(c.Dir, testBuildID, "symtab")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	try := func(what string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if load(testBuildID, "symtab", "k1") {
			t.Errorf("%s: believed", what)
		}
	}
	for _, at := range []int{0, len(objCacheMagic), len(objCacheMagic) + 4, len(objCacheMagic) + 6, len(good) / 2, len(good) - 1} {
		b := slices.Clone(good)
		b[at] ^= 0x40
		try("byte "+strconv.Itoa(at)+" flipped", b)
	}
	try("cut short", good[:len(good)-1])
	try("grown", append(slices.Clone(good), 0))
	try("empty", nil)
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if !load(testBuildID, "symtab", "k1") {
		t.Fatal("the good file again: not read")
	}
}

// TestObjectCacheConcurrent: runs storing and reading the same entry at
// once each read nothing or a whole payload.
func TestObjectCacheConcurrent(t *testing.T) {
	t.Parallel()
	enc, err := testSymbolTable(t).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: t.TempDir()}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if err := c.Store(testBuildID, "symtab", "k", enc); err != nil {
					t.Error(err)
					return
				}
				if got, ok := c.Load(testBuildID, "symtab", "k"); ok && !slices.Equal(got, enc) {
					t.Error("a partial or mixed payload")
					return
				}
			}
		})
	}
	wg.Wait()
	if _, ok := c.Load(testBuildID, "symtab", "k"); !ok {
		t.Fatal("nothing cached")
	}
}

// FuzzObjectCacheFile: any file decodes to an error or to a payload,
// which, as a symbol table, decodes to an error or to a table.
func FuzzObjectCacheFile(f *testing.F) {
	fuzzbudget.Limit(f)
	dir := f.TempDir()
	c := &Cache{Dir: dir}
	// One symbol "f" at 0x1000, 16 bytes (symbols.AppendBinary's form).
	one := binary.LittleEndian.AppendUint32(nil, 1)
	one = binary.LittleEndian.AppendUint32(one, 1)
	one = binary.LittleEndian.AppendUint64(one, 0x1000)
	one = binary.LittleEndian.AppendUint64(one, 0x10)
	one = append(one, 0, 0, 0, 0, 1, 0, 0, 0, 'f')
	if _, err := symbols.UnmarshalTable(one); err != nil {
		f.Fatal(err)
	}
	if err := c.Store(testBuildID, "symtab", "key", one); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, testBuildID, "symtab"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := decodeObjCacheFile(b, "key")
		if err != nil {
			return
		}
		if tab, err := symbols.UnmarshalTable(payload); err == nil {
			for s := range tab.All() {
				tab.Lookup(s.Start)
			}
		}
	})
}
