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

	"stacktop/internal/fuzzbudget"
	"stacktop/symbols"
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

// TestSymbolCache: a stored table reads back equal under its key, and
// under no other; a file damaged anywhere, cut short or grown is not
// believed.
func TestSymbolCache(t *testing.T) {
	tab := testSymbolTable(t)
	c := &Cache{Dir: t.TempDir()}
	if got := c.Symbols(testBuildID, "k1"); got != nil {
		t.Fatal("a table from an empty cache")
	}
	if err := c.StoreSymbols(testBuildID, "k1", tab); err != nil {
		t.Fatal(err)
	}
	got := c.Symbols(testBuildID, "k1")
	if got == nil {
		t.Fatal("stored table not read back")
	}
	if !slices.Equal(slices.Collect(got.All()), slices.Collect(tab.All())) {
		t.Fatal("table read back differs")
	}
	if c.Symbols(testBuildID, "k2") != nil {
		t.Error("a table built from other files was believed (key k2)")
	}
	if c.Symbols("fedcba9876543210", "k1") != nil {
		t.Error("another build ID's table")
	}
	for _, id := range []string{"../x", "AB12", "", "a"} {
		if err := c.StoreSymbols(id, "k1", tab); err != nil || c.Symbols(id, "k1") != nil {
			t.Errorf("build ID %q: stored or read (%v); want it ignored", id, err)
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
		if c.Symbols(testBuildID, "k1") != nil {
			t.Errorf("%s: believed", what)
		}
	}
	for _, at := range []int{0, len(symCacheMagic), len(symCacheMagic) + 4, len(symCacheMagic) + 6, len(good) / 2, len(good) - 1} {
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
	if c.Symbols(testBuildID, "k1") == nil {
		t.Fatal("the good file again: not read")
	}
}

// TestSymbolCacheConcurrent: runs storing and reading the same entry at
// once each read nothing or a whole table.
func TestSymbolCacheConcurrent(t *testing.T) {
	tab := testSymbolTable(t)
	want := slices.Collect(tab.All())
	c := &Cache{Dir: t.TempDir()}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if err := c.StoreSymbols(testBuildID, "k", tab); err != nil {
					t.Error(err)
					return
				}
				if got := c.Symbols(testBuildID, "k"); got != nil && !slices.Equal(slices.Collect(got.All()), want) {
					t.Error("a partial or mixed table")
					return
				}
			}
		})
	}
	wg.Wait()
	if c.Symbols(testBuildID, "k") == nil {
		t.Fatal("nothing cached")
	}
}

// FuzzSymbolCacheFile: any file decodes to an error or to a table.
func FuzzSymbolCacheFile(f *testing.F) {
	fuzzbudget.Limit(f)
	dir := f.TempDir()
	c := &Cache{Dir: dir}
	// One symbol "f" at 0x1000, 16 bytes, no parent (symbols.AppendBinary's form).
	one := binary.LittleEndian.AppendUint32(nil, 1)
	one = binary.LittleEndian.AppendUint32(one, 1)
	one = binary.LittleEndian.AppendUint64(one, 0x1000)
	one = binary.LittleEndian.AppendUint64(one, 0x10)
	one = append(one, 0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'f')
	tab, err := symbols.UnmarshalTable(one)
	if err != nil {
		f.Fatal(err)
	}
	if err := c.StoreSymbols(testBuildID, "key", tab); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, testBuildID, "symtab"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := decodeSymCacheFile(b, "key")
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
