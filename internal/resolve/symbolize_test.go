package resolve

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/unwind"
)

// selfTarget is a Target over this test process, enough for symbolising
// (no ptrace attach: process_vm_readv of oneself needs none).
func selfTarget(t *testing.T) *Resolver {
	t.Helper()
	return targetOf(t, os.Getpid())
}

// sleeper starts a dynamically linked process (sleep) through a shell, so
// that it is not this process's child, and returns its pid.
func sleeper(t testing.TB) int {
	out, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Skip("cannot start sleep:", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// The shell's fork runs sh until it execs sleep, and then ld.so maps
	// libc: wait for both.
	for i := 0; i < 200; i++ {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if strings.HasSuffix(exe, "sleep") && bytes.Contains(maps, []byte("libc.so")) {
			time.Sleep(20 * time.Millisecond) // ld.so may still be mapping
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pid
}

func targetOf(t *testing.T, pid int) *Resolver {
	t.Helper()
	cache := modules.NewModuleCache()
	syms := newSymbolizer()
	t.Cleanup(func() { syms.close(); cache.Close() })
	space, err := modules.LoadAddressSpace(pid, cache)
	if err != nil {
		t.Fatal(err)
	}
	mem := ptrace.NewMemory(pid)
	t.Cleanup(func() { mem.Close() })
	return &Resolver{PID: pid, mem: mem, cache: cache, space: space, syms: syms}
}

// vdsoBase reads AT_SYSINFO_EHDR from /proc/self/auxv: where the kernel
// mapped the vDSO, independent of /proc/self/maps.
func vdsoBase(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Skip(err)
	}
	for ; len(b) >= 16; b = b[16:] {
		if binary.NativeEndian.Uint64(b) == 33 { // AT_SYSINFO_EHDR
			return binary.NativeEndian.Uint64(b[8:])
		}
	}
	t.Skip("no AT_SYSINFO_EHDR: no vDSO")
	return 0
}

// TestVDSOSymbols reads the live vDSO, and checks an address inside
// clock_gettime is named after it.
func TestVDSOSymbols(t *testing.T) {
	base := vdsoBase(t)
	tg := selfTarget(t)
	if err := attachVDSO(tg.space, tg.mem); err != nil {
		t.Fatal(err)
	}
	em, ok := tg.space.Find(base)
	if !ok || !em.IsVDSO || em.Module == nil {
		t.Fatalf("vDSO at %#x not attached: %+v", base, em)
	}
	// The expected address comes from a second, independent read of the
	// image through /proc/self/mem and debug/elf.
	img := make([]byte, em.End-em.Start)
	mf, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	if _, err := mf.ReadAt(img, int64(em.Start)); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var pc uint64
	var want string
	for _, s := range dyn {
		if strings.HasSuffix(s.Name, "clock_gettime") && s.Size > 0 {
			pc = base + s.Value + s.Size/2 // the image is linked at 0
			want = s.Name
			break
		}
	}
	if pc == 0 {
		t.Skip("vDSO exports no clock_gettime")
	}
	fr, _ := tg.symbolizeFrames([]unwind.Frame{{PC: pc, Exact: true}}, SymbolOptions{})
	if len(fr) != 1 || !strings.HasSuffix(fr[0].Function, "clock_gettime") || fr[0].Module != "[vdso]" {
		t.Fatalf("%#x: %+v, want %s in [vdso]", pc, fr, want)
	}
	t.Logf("%#x: %s+%#x", pc, fr[0].Function, fr[0].Offset)
}

// TestSymbolizeLibcDebug names a PC inside libc's start_thread, a local
// function only the libc6-dbg debug file knows, through the whole
// symboliser, with file:line from its DWARF.
func TestSymbolizeLibcDebug(t *testing.T) {
	tg := targetOf(t, sleeper(t))
	for i := range tg.space.Exec {
		em := &tg.space.Exec[i]
		if em.Module == nil || !strings.Contains(em.Path, "libc.so") {
			continue
		}
		ms := tg.syms.module(tg, em.Module)
		if ms.debug == nil {
			t.Skip("libc has no debug file here (install libc6-dbg)")
		}
		syms, err := ms.debug.File.Symbols()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			if s.Name != "start_thread" {
				continue
			}
			pc := s.Value + em.Bias + 0x40
			fr, _ := tg.symbolizeFrames([]unwind.Frame{{PC: pc, Exact: true}}, SymbolOptions{})
			last := fr[len(fr)-1]
			if last.Function != "start_thread" || last.Line == 0 || !strings.HasSuffix(last.File, "pthread_create.c") {
				t.Fatalf("%#x: %+v", pc, fr)
			}
			noLines, _ := tg.symbolizeFrames([]unwind.Frame{{PC: pc, Exact: true}}, SymbolOptions{NoLines: true})
			if len(noLines) != 1 || noLines[0].Line != 0 || noLines[0].Function != "start_thread" {
				t.Fatalf("NoLines: %+v", noLines)
			}
			return
		}
		t.Fatal("start_thread not in libc's debug file")
	}
	t.Skip("libc not mapped (static test binary)")
}

// BenchmarkSymbolizeCached symbolises one PC with lines and inlines, after
// the first call decoded its unit.
func BenchmarkSymbolizeCached(b *testing.B) {
	pid := sleeper(b)
	cache := modules.NewModuleCache()
	defer cache.Close()
	syms := newSymbolizer()
	defer syms.close()
	space, err := modules.LoadAddressSpace(pid, cache)
	if err != nil {
		b.Fatal(err)
	}
	tg := &Resolver{PID: pid, mem: ptrace.NewMemory(pid), cache: cache, space: space, syms: syms}
	var pc uint64
	for i := range space.Exec {
		em := &space.Exec[i]
		if em.Module != nil && strings.Contains(em.Path, "libc.so") {
			pc = em.Start + 0x1000
		}
	}
	if pc == 0 {
		b.Skip("libc not mapped")
	}
	frames := []unwind.Frame{{PC: pc}}
	tg.symbolizeFrames(frames, SymbolOptions{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tg.symbolizeFrames(frames, SymbolOptions{})
	}
}
