package resolve

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/symbols"
)

// TestPrefetchLines: prefetching a walk's frames loads the symbol and line
// tables of the modules they are in without any naming (the symbolizer
// reports them ready); with NoLines, the symbol tables only.
func TestPrefetchLines(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	walks := target.walks(t, target.proc.Threads())
	if len(walks) == 0 {
		t.Fatal("no walks")
	}
	started := func() (n int) {
		target.syms.mu.Lock()
		defer target.syms.mu.Unlock()
		for _, ms := range target.syms.mods {
			if ms.linesStarted.Load() {
				n++
			}
		}
		return n
	}
	target.syms.close()
	target.syms = newSymbolizer()
	target.opts.Symbols.NoLines = true
	for _, w := range walks {
		target.PrefetchLines(w)
	}
	if n := started(); n != 0 {
		t.Errorf("with NoLines, line tables of %d modules started loading", n)
	}
	target.syms.mu.Lock()
	mods := len(target.syms.mods)
	target.syms.mu.Unlock()
	if mods < 2 {
		t.Errorf("with NoLines, symbols of %d modules prefetched, want the program's and libc's", mods)
	}
	target.opts.Symbols.NoLines = false
	for _, w := range walks {
		target.PrefetchLines(w)
	}
	// A load still under way starts the lines when it ends (just
	// after closing loaded): wait for them to start.
	for deadline := time.Now().Add(20 * time.Second); started() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := started(); n < 2 {
		t.Fatalf("line tables of %d modules started loading, want the program's and libc's", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for target.syms.readiness() < int64(started()) {
		if time.Now().After(deadline) {
			t.Fatalf("line tables not ready 20 s after the prefetch (readiness %d)", target.syms.readiness())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPrefetchCommon: before any walk, the program's and libc's symbol,
// line and CFI tables start loading, and no other module's.
func TestPrefetchCommon(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	target.syms.close()
	target.syms = newSymbolizer()
	target.PrefetchCommon()
	target.syms.mu.Lock()
	var names []string
	var loads []*moduleSymbols
	for m, ms := range target.syms.mods {
		names = append(names, filepath.Base(m.Path))
		loads = append(loads, ms)
	}
	target.syms.mu.Unlock()
	slices.Sort(names)
	if len(names) != 2 || names[0] != "chains-sframe3" || !isCLibrary(names[1]) {
		t.Fatalf("prefetched %q, want the program and libc", names)
	}
	for i, ms := range loads {
		select {
		case <-ms.loaded:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: symbols not loaded 20 s after the prefetch", names[i])
		}
		if ms.table == nil || ms.table.Len() == 0 {
			t.Errorf("%s: no symbol table", names[i])
		}
		// (They start on the prefetch's goroutine once the debug file
		// is known.)
		for deadline := time.Now().Add(20 * time.Second); !ms.linesStarted.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if !ms.linesStarted.Load() {
			t.Errorf("%s: line tables not started", names[i])
		}
	}
}

func TestIsCLibrary(t *testing.T) {
	for path, want := range map[string]bool{
		"/usr/lib/x86_64-linux-gnu/libc.so.6": true,
		"/lib/libc-2.31.so":                   true,
		"/lib/ld-musl-x86_64.so.1":            true,
		"/usr/lib/libc.musl-x86_64.so.1":      true,
		"/usr/lib/x86_64-linux-gnu/libcap.so": false,
		"/usr/lib/libcrypto.so.3":             false,
		"/usr/lib/libc-client.so.2007e":       false,
		"/usr/bin/libc":                       false,
		"/lib64/ld-linux-x86-64.so.2":         false,
	} {
		if got := isCLibrary(path); got != want {
			t.Errorf("isCLibrary(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestSymbolTableCached: a module's symbol table is written to the cache
// once, read back by the next resolver unchanged (the file is not written
// again), and built again, right, when the file is damaged.
func TestSymbolTableCached(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	dir := t.TempDir()
	target.opts.Symbols.CacheDir = dir
	libc := cLibrary(t, target)
	path := filepath.Join(dir, libc.BuildID, "symtab")
	load := func() []symbols.Symbol {
		t.Helper()
		target.syms.close()
		target.syms = newSymbolizer()
		ms := target.syms.module(target.Resolver, libc)
		if ms.table == nil || ms.table.Len() == 0 {
			t.Fatal("no symbol table")
		}
		return slices.Collect(ms.table.All())
	}
	built := load()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("not cached: %v", err)
	}
	time.Sleep(10 * time.Millisecond) // a rewrite would change the time
	if got := load(); !slices.Equal(got, built) {
		t.Fatal("the cached table differs from the one built")
	}
	if fi2, err := os.Stat(path); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the cache file was written again (%v): not read back", err)
	}
	// Built from other files (here: a debug file of another size and
	// time): not believed, built again, written again.
	libc.Key.Size++
	time.Sleep(10 * time.Millisecond)
	if got := load(); !slices.Equal(got, built) {
		t.Fatal("the table built under another key differs")
	}
	fi3, err := os.Stat(path)
	if err != nil || fi3.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("a table cached for other files was used (%v)", err)
	}
	libc.Key.Size--
	load() // (cached for the real key again)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1 // the last name's last byte
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := load(); !slices.Equal(got, built) {
		t.Fatal("a damaged cache file changed the table")
	}
}

// TestFuncNamesCached: libc's function names for tail calls are written
// to the cache once and read back (not written again) with the same
// values as FuncValues gives.
func TestFuncNamesCached(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	libc := cLibrary(t, target)
	ms := target.syms.located(target.Resolver, libc)
	var debug *elf.File
	if ms.debug != nil {
		debug = ms.debug.File
	}
	want, err := symbols.FuncValues(libc.File, debug)
	if err != nil || len(want) == 0 {
		t.Fatalf("FuncValues: %d names, %v", len(want), err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, libc.BuildID, "funcs")
	var mtime time.Time
	for round := range 2 {
		names, _ := loadFuncNames(libc, ms.debug, dir)
		if names.Len() != len(want) {
			t.Fatalf("round %d: %d names, want %d", round, names.Len(), len(want))
		}
		for name, v := range want {
			if got, ok := names.Value(name); !ok || got != v {
				t.Fatalf("round %d: Value(%q) = %#x, %v, want %#x", round, name, got, ok, v)
			}
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("round %d: not cached: %v", round, err)
		}
		if round == 1 && !fi.ModTime().Equal(mtime) {
			t.Fatal("the cache file was written again: not read back")
		}
		mtime = fi.ModTime()
		time.Sleep(10 * time.Millisecond)
	}
}

// cLibrary is target's C library module, which the cache tests need with
// a build ID (they skip without one).
func cLibrary(t *testing.T, target *liveTarget) *modules.Module {
	t.Helper()
	for i := range target.space.Exec {
		if m := target.space.Exec[i].Module; m != nil && isCLibrary(m.Path) && m.BuildID != "" {
			return m
		}
	}
	t.Skip("no libc with a build ID")
	return nil
}

// TestFuncNamesNotCachedAfterClose: Resolver.Close no longer waits for a
// names load (startNames) before it closes the debug file the load reads.
// A load whose reads of the debug file then fail must not store what it
// got in the cache between runs, or every later run takes libc's names
// without the debug file's. The close is timed at points spread over a
// load's length (it must land after the cache key is taken and before
// the debug file's .symtab is read). (It failed while loadFuncNames
// dropped FuncValues' error and stored the partial names.)
func TestFuncNamesNotCachedAfterClose(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "chains-sframe3")
	target := openTarget(t, tg.PID())
	libc := cLibrary(t, target)
	ms := target.syms.located(target.Resolver, libc)
	if ms.debug == nil {
		t.Skip("no separate debug file for libc")
	}
	t0 := time.Now()
	want, err := symbols.FuncValues(libc.File, ms.debug.File)
	took := time.Since(t0)
	if err != nil || len(want) == 0 {
		t.Fatalf("FuncValues: %d names, %v", len(want), err)
	}
	key, ok := tableKey(libc, ms.debug)
	if !ok {
		t.Skip("libc has no cache key")
	}
	loc := debuginfo.Locator{}
	for try := range 40 {
		df, err := loc.Find(ms.debug.Path, libc.File, libc.BuildID)
		if err != nil {
			df, err = loc.Find(libc.Path, libc.File, libc.BuildID)
		}
		if err != nil {
			t.Skipf("reopening the debug file: %v", err)
		}
		dir := t.TempDir()
		done := make(chan struct{})
		go func() {
			defer close(done)
			loadFuncNames(libc, df, dir)
		}()
		time.Sleep(took * time.Duration(try) / 40)
		df.Close() // what Resolver.Close does while startNames runs
		<-done
		c := &debuginfo.Cache{Dir: dir}
		if b, ok := c.Load(libc.BuildID, "funcs", key); ok {
			names, err := symbols.UnmarshalFuncNames(b)
			if err != nil || names.Len() != len(want) {
				t.Fatalf("close after %v of %v: %d names cached, want %d (or none)", took*time.Duration(try)/40, took, names.Len(), len(want))
			}
		}
	}
}
