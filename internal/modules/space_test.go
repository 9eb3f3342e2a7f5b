package modules

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/regs"
)

// buildC compiles testdata/src into dir/out with gcc and extra flags.
func buildC(t *testing.T, dir, out, src string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	srcPath, err := filepath.Abs(filepath.Join("testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, out)
	args := append([]string{"-g", "-O0", "-o", outPath, srcPath}, flags...)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return outPath
}

type target struct {
	cmd *exec.Cmd
	pid int
	in  io.WriteCloser
	out *bufio.Reader
}

// startTarget runs a target binary and waits until it has printed "ready",
// i.e. until its dynamic loader has mapped everything.
func startTarget(t *testing.T, path string) *target {
	t.Helper()
	cmd := exec.Command(path)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tg := &target{cmd: cmd, pid: cmd.Process.Pid, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, err := tg.out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("target said %q, %v", line, err)
	}
	return tg
}

func (tg *target) send(t *testing.T, line string) string {
	t.Helper()
	if _, err := io.WriteString(tg.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
	reply, err := tg.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(reply, "\n")
}

func symbolValue(t *testing.T, f *elf.File, name string) uint64 {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		syms, err = f.DynamicSymbols()
	}
	if err != nil {
		t.Fatalf("symbols: %v", err)
	}
	for _, s := range syms {
		if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			return s.Value
		}
	}
	t.Fatalf("no function symbol %s", name)
	return 0
}

// execOf returns the first executable mapping of path.
func execOf(t *testing.T, as *AddressSpace, path string) *ExecMapping {
	t.Helper()
	for i := range as.Exec {
		if as.Exec[i].Path == path {
			return &as.Exec[i]
		}
	}
	t.Fatalf("no executable mapping of %s in pid %d", path, as.PID)
	return nil
}

// lowestMapping is the lowest mapping of path: for an object whose first
// PT_LOAD has p_vaddr 0 and p_offset 0, its start is the load bias, a
// figure independent of procmaps.LoadBias's arithmetic.
func lowestMapping(as *AddressSpace, path string) *procmaps.Mapping {
	for i := range as.Mappings {
		if as.Mappings[i].Path == path {
			return &as.Mappings[i]
		}
	}
	return nil
}

func newCache(t *testing.T) *ModuleCache {
	c := NewModuleCache()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// checkMain checks that main's ELF address plus the bias lands inside an
// executable mapping of the same module.
func checkMain(t *testing.T, as *AddressSpace, em *ExecMapping) uint64 {
	t.Helper()
	if em.Module == nil {
		t.Fatalf("%s: no module: %v", em.Path, em.Err)
	}
	addr := symbolValue(t, em.Module.File, "main") + em.Bias
	got, ok := as.Find(addr)
	if !ok || got.Module != em.Module || !got.IsExec() {
		t.Fatalf("main at %#x (bias %#x) is not in an executable mapping of %s: %+v", addr, em.Bias, em.Path, got)
	}
	return addr
}

func TestExecutableBias(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name  string
		flags []string
		typ   elf.Type
	}{
		{"pie", []string{"-fPIE", "-pie"}, elf.ET_DYN},
		{"no-pie", []string{"-fno-pie", "-no-pie"}, elf.ET_EXEC},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exe := buildC(t, dir, tt.name, "target.c", append(tt.flags, "-ldl")...)
			tg := startTarget(t, exe)
			as, err := LoadAddressSpace(tg.pid, newCache(t))
			if err != nil {
				t.Fatal(err)
			}
			em := execOf(t, as, exe)
			checkMain(t, as, em)
			mod := em.Module
			if mod.Type != tt.typ || mod.Arch != regs.Host() || mod.BuildID == "" || mod.Path != exe {
				t.Errorf("module %+v: want type %v arch %v, a build ID, path %s", mod, tt.typ, regs.Host(), exe)
			}
			switch tt.typ {
			case elf.ET_EXEC:
				if em.Bias != 0 {
					t.Errorf("non-PIE bias %#x, want 0", em.Bias)
				}
			case elf.ET_DYN:
				if low := lowestMapping(as, exe); em.Bias == 0 || low.Offset != 0 || em.Bias != low.Start {
					t.Errorf("PIE bias %#x, lowest mapping %+v", em.Bias, low)
				}
			}
			// Every executable mapping of the file agrees on the bias.
			for _, r := range as.ExecRanges(em) {
				e, ok := as.Find(r.Start)
				if !ok || e.Module != mod || e.Bias != em.Bias {
					t.Errorf("range %#x-%#x: %+v", r.Start, r.End, e)
				}
			}
		})
	}
}

func TestBuildIDMatchesReadelf(t *testing.T) {
	if _, err := exec.LookPath("readelf"); err != nil {
		t.Skip("readelf not installed")
	}
	exe := buildC(t, t.TempDir(), "t", "target.c", "-Wl,--build-id=sha1")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := buildid.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("readelf", "-n", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 40 || !bytes.Contains(out, []byte("Build ID: "+id)) {
		t.Errorf("build ID %q not in readelf -n output:\n%s", id, out)
	}
}

func TestDeletedExecutable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("map_files needs CAP_SYS_ADMIN")
	}
	exe := buildC(t, t.TempDir(), "doomed", "target.c", "-ldl")
	tg := startTarget(t, exe)
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	as, err := LoadAddressSpace(tg.pid, newCache(t))
	if err != nil {
		t.Fatal(err)
	}
	em := execOf(t, as, exe)
	if !em.Deleted {
		t.Errorf("mapping not marked deleted: %+v", em.Mapping)
	}
	checkMain(t, as, em)
	if em.Module.Source != procmaps.SourceMapFiles {
		t.Errorf("opened via %v, want map_files", em.Module.Source)
	}
	// Without map_files there is nothing to open: procmaps' TestOpenDeleted.
}

func TestDlopenAndRefresh(t *testing.T) {
	dir := t.TempDir()
	exe := buildC(t, dir, "host", "target.c", "-ldl")
	lib := buildC(t, dir, "libst.so", "lib.c", "-shared", "-fPIC")
	tg := startTarget(t, exe)
	cache := newCache(t)
	as, err := LoadAddressSpace(tg.pid, cache)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := as.Refresh(); err != nil || same != as {
		t.Fatalf("Refresh of an unchanged process: %p vs %p, %v", same, as, err)
	}
	if reply := tg.send(t, "dlopen "+lib); reply != "ok" {
		t.Fatalf("dlopen: %s", reply)
	}
	as2, err := as.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	if as2 == as {
		t.Fatal("Refresh after dlopen returned the old snapshot")
	}
	for _, e := range as.Exec {
		if e.Path == lib {
			t.Fatal("old snapshot changed")
		}
	}
	em := execOf(t, as2, lib)
	if em.Module == nil {
		t.Fatalf("library has no module: %v", em.Err)
	}
	addr := symbolValue(t, em.Module.File, "stacktop_lib_func") + em.Bias
	if got, ok := as2.Find(addr); !ok || got.Module != em.Module {
		t.Errorf("stacktop_lib_func at %#x not in the library: %+v", addr, got)
	}
	if low := lowestMapping(as2, lib); em.Bias != low.Start {
		t.Errorf("library bias %#x, lowest mapping at %#x", em.Bias, low.Start)
	}
	if execOf(t, as2, exe).Module != execOf(t, as, exe).Module {
		t.Error("executable's module not reused across Refresh")
	}
}

func TestCacheSharesModules(t *testing.T) {
	exe := buildC(t, t.TempDir(), "twice", "target.c", "-ldl")
	a, b := startTarget(t, exe), startTarget(t, exe)
	cache := newCache(t)
	asA, err := LoadAddressSpace(a.pid, cache)
	if err != nil {
		t.Fatal(err)
	}
	n := cache.Len()
	asB, err := LoadAddressSpace(b.pid, cache)
	if err != nil {
		t.Fatal(err)
	}
	if ma, mb := execOf(t, asA, exe).Module, execOf(t, asB, exe).Module; ma == nil || ma != mb {
		t.Errorf("two processes of %s got modules %p and %p", exe, ma, mb)
	}
	if cache.Len() != n {
		t.Errorf("second process added modules: %d -> %d", n, cache.Len())
	}
	// Every file module of B is A's, libc included.
	for _, e := range asB.Exec {
		if e.Module != nil {
			if ea := execOf(t, asA, e.Path); ea.Module != e.Module {
				t.Errorf("%s: not shared", e.Path)
			}
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestCacheKeys: copies of a binary (new inodes) share a Module through the
// build ID; without a build ID only the same file does.
func TestCacheKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name    string
		buildID string
		shared  bool
	}{
		{"build-id", "--build-id=sha1", true},
		{"no build-id", "--build-id=none", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := buildC(t, dir, tt.name+"-a", "target.c", "-ldl", "-Wl,"+tt.buildID)
			b := filepath.Join(dir, tt.name+"-b")
			copyFile(t, a, b)
			cache := newCache(t)
			asA, err := LoadAddressSpace(startTarget(t, a).pid, cache)
			if err != nil {
				t.Fatal(err)
			}
			asB, err := LoadAddressSpace(startTarget(t, b).pid, cache)
			if err != nil {
				t.Fatal(err)
			}
			ma, mb := execOf(t, asA, a).Module, execOf(t, asB, b).Module
			if ma == nil || mb == nil {
				t.Fatal("missing module")
			}
			if (ma.BuildID != "") != tt.shared || (ma == mb) != tt.shared {
				t.Errorf("build ID %q: modules %p and %p, want shared=%v", ma.BuildID, ma, mb, tt.shared)
			}
			// A second process of the same file shares by file key either way.
			asA2, err := LoadAddressSpace(startTarget(t, a).pid, cache)
			if err != nil {
				t.Fatal(err)
			}
			if execOf(t, asA2, a).Module != ma {
				t.Error("same file, different module")
			}
		})
	}
}

func TestCacheConcurrent(t *testing.T) {
	cache := newCache(t)
	var wg sync.WaitGroup
	res := make([]*AddressSpace, 4)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			as, err := LoadAddressSpace(os.Getpid(), cache)
			if err != nil {
				t.Error(err)
			}
			res[i] = as
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	exe, _ := os.Executable()
	want := execOf(t, res[0], exe).Module
	for _, as := range res[1:] {
		if got := execOf(t, as, exe).Module; got != want {
			t.Errorf("concurrent loads got modules %p and %p", got, want)
		}
	}
	if err := cache.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAddressSpace(os.Getpid(), cache); err != nil {
		t.Fatal(err) // the maps still load; modules fail
	}
	if m, err := cache.ForMapping(os.Getpid(), &execOf(t, res[0], exe).Mapping); !errors.Is(err, ErrCacheClosed) {
		t.Errorf("after Close: %v, %v", m, err)
	}
}

func TestGoSelf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	as, err := LoadAddressSpace(os.Getpid(), newCache(t))
	if err != nil {
		t.Fatal(err)
	}
	pc := uint64(reflect.ValueOf(TestGoSelf).Pointer())
	em, ok := as.Find(pc)
	if !ok || em.Module == nil || em.Path != exe {
		t.Fatalf("own PC %#x: %+v", pc, em)
	}
	// go test strips the symbol table (-s), so check against .text.
	text := em.Module.File.Section(".text")
	if text == nil {
		t.Fatal("no .text")
	}
	if lo, hi := text.Addr+em.Bias, text.Addr+text.Size+em.Bias; pc < lo || pc >= hi {
		t.Errorf("pc %#x outside .text %#x-%#x (bias %#x)", pc, lo, hi, em.Bias)
	}
	if f := em.Module.File; f.Type == elf.ET_EXEC && em.Bias != 0 {
		t.Errorf("ET_EXEC Go binary with bias %#x", em.Bias)
	}
	if em.Module.Arch != regs.Host() {
		t.Errorf("arch %v", em.Module.Arch)
	}
	// A local variable lives on a goroutine stack, which is Go heap
	// memory: an anonymous (or heap) mapping, never executable.
	var local int
	sp := uint64(reflect.ValueOf(&local).Pointer())
	m, ok := as.MappingAt(sp)
	if !ok || m.IsExec() || !m.Contains(sp) {
		t.Errorf("stack address %#x: %+v", sp, m)
	}
	if _, ok := as.Find(sp); ok {
		t.Errorf("Find found a stack address")
	}
	if _, ok := as.MappingAt(0); ok {
		t.Error("MappingAt(0) found a mapping")
	}
}

func TestSleepProcess(t *testing.T) {
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	cmd := exec.Command(path, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Wait until the dynamic loader is done: three executable files
	// (sleep, ld.so, libc) mapped.
	var as *AddressSpace
	cache := newCache(t)
	for i := 0; i < 500; i++ {
		if as, err = LoadAddressSpace(cmd.Process.Pid, cache); err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, e := range as.Exec {
			if e.IsFile() {
				files++
			}
		}
		if files >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var modules, vdso int
	var stack *procmaps.Mapping
	for _, e := range as.Exec {
		if e.IsVDSO {
			vdso++
			if e.Module != nil {
				t.Error("vDSO has a module")
			}
			continue
		}
		if e.IsFile() {
			if e.Module == nil {
				t.Errorf("%s: %v", e.Path, e.Err)
				continue
			}
			modules++
			if e.Module.Arch != regs.Host() || e.Module.BuildID == "" {
				t.Errorf("%s: arch %v build ID %q", e.Path, e.Module.Arch, e.Module.BuildID)
			}
		}
	}
	for i := range as.Mappings {
		if as.Mappings[i].Kind == procmaps.KindStack {
			stack = &as.Mappings[i]
		}
	}
	if modules < 3 || vdso != 1 || stack == nil { // sleep, libc, ld.so
		t.Errorf("%d file modules, %d vDSO, stack %v in\n%v", modules, vdso, stack, as.Mappings)
	}
	if m, ok := as.MappingAt(stack.End - 8); !ok || m.Kind != procmaps.KindStack {
		t.Errorf("MappingAt(top of stack) = %+v", m)
	}
}

// TestVDSOImage reads our own vDSO out of memory and builds a Module from it.
func TestVDSOImage(t *testing.T) {
	ms, err := procmaps.ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var v *procmaps.Mapping
	for i := range ms {
		if ms[i].Kind == procmaps.KindVDSO {
			v = &ms[i]
		}
	}
	if v == nil {
		t.Skip("no vDSO")
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	image := make([]byte, v.Size())
	if _, err := mem.ReadAt(image, int64(v.Start)); err != nil {
		t.Fatal(err)
	}
	mod, err := ModuleFromImage("[vdso]", image)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	if mod.Arch != regs.Host() || mod.Type != elf.ET_DYN || mod.Source != procmaps.SourceImage || mod.Path != "[vdso]" {
		t.Errorf("vDSO module %+v", mod)
	}
	syms, err := mod.File.DynamicSymbols()
	if err != nil || len(syms) == 0 {
		t.Fatalf("vDSO dynamic symbols: %d, %v", len(syms), err)
	}
	// The bias of an image mapped from offset 0 is computed like a file's.
	bias, err := procmaps.LoadBias(mod.File, v, uint64(os.Getpagesize()))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && !v.Contains(s.Value+bias) {
			t.Errorf("%s at %#x+%#x outside the vDSO %#x-%#x", s.Name, s.Value, bias, v.Start, v.End)
		}
	}
	if _, err := ModuleFromImage("junk", []byte("not an ELF")); err == nil {
		t.Error("junk image accepted")
	}
}

func TestSFrameModule(t *testing.T) {
	exe := buildC(t, t.TempDir(), "sf", "target.c", "-ldl", "-Wa,--gsframe")
	tg := startTarget(t, exe)
	as, err := LoadAddressSpace(tg.pid, newCache(t))
	if err != nil {
		t.Fatal(err)
	}
	mod := execOf(t, as, exe).Module
	if mod == nil {
		t.Fatal("no module")
	}
	if mod.SFrameErr != nil && strings.Contains(mod.SFrameErr.Error(), "TODO") {
		t.Skip("sframe decoder not written yet:", mod.SFrameErr)
	}
	if mod.SFrame == nil || mod.SFrameErr != nil {
		t.Fatalf("assembled with --gsframe, got SFrame %v, err %v", mod.SFrame, mod.SFrameErr)
	}
	if mod.SFrame.NumFuncs() == 0 {
		t.Error("empty .sframe")
	}
	// main's row must be found at its runtime address minus the bias.
	main := symbolValue(t, mod.File, "main")
	if _, err := mod.SFrame.Lookup(main); err != nil {
		t.Errorf("Lookup(main %#x): %v", main, err)
	}
}

// TestCorruptSFrameNotFatal: a module whose .sframe is damaged still loads,
// with the damage recorded in SFrameErr.
func TestCorruptSFrameNotFatal(t *testing.T) {
	exe := buildC(t, t.TempDir(), "sf", "target.c", "-ldl", "-Wa,--gsframe")
	image, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	sec := f.Section(".sframe")
	if sec == nil {
		t.Skip("assembler wrote no .sframe")
	}
	good, err := ModuleFromImage("good", image)
	if err != nil {
		t.Fatal(err)
	}
	if good.SFrameErr != nil && strings.Contains(good.SFrameErr.Error(), "TODO") {
		t.Skip("sframe decoder not written yet")
	}
	if good.SFrame == nil || good.SFrameErr != nil {
		t.Fatalf("intact image: SFrame %v, err %v", good.SFrame, good.SFrameErr)
	}
	image[sec.Offset] ^= 0xff // the magic
	bad, err := ModuleFromImage("bad", image)
	if err != nil {
		t.Fatalf("corrupt .sframe made the module fail: %v", err)
	}
	if bad.SFrame != nil || bad.SFrameErr == nil {
		t.Errorf("corrupt .sframe: SFrame %v, err %v", bad.SFrame, bad.SFrameErr)
	}
	if bad.BuildID != good.BuildID || bad.BuildID == "" {
		t.Errorf("build IDs %q vs %q", bad.BuildID, good.BuildID)
	}
}
