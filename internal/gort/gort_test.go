package gort

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

func openTarget(t *testing.T, name string) *elf.File {
	t.Helper()
	f, err := elf.Open(targets.Path(name))
	if err != nil {
		t.Fatalf("%v (run scripts/build-targets.sh)", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// modRM encodes "op disp(base), reg" with a REX.W prefix, as the Go
// assembler does: disp8 when it fits, disp32 otherwise.
func modRM(op byte, reg, base byte, disp uint64) []byte {
	if disp < 0x80 {
		return []byte{0x48, op, 0x40 | reg<<3 | base, byte(disp)}
	}
	b := []byte{0x48, op, 0x80 | reg<<3 | base, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[3:], uint32(disp))
	return b
}

// TestLoadGoprog checks the offsets read from goprog's DWARF against the
// machine code of its runtime.systemstack, which the Go assembler built
// from the compiler's own offsets (go_asm.h), not from DWARF:
//
//	MOVQ FS:-8, AX          the g slot (tlsG)
//	MOVQ g_m(AX), BX
//	CMPQ AX, m_curg(BX)
//	MOVQ (g_sched+gobuf_sp)(DX), SP
//	MOVQ (g_sched+gobuf_bp)(AX), BP
func TestLoadGoprog(t *testing.T) {
	f := openTarget(t, "goprog")
	if f.Machine != elf.EM_X86_64 {
		t.Skip("goprog is not an x86-64 binary")
	}
	l, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	fn := code[l.systemstack.start-text.Addr : l.systemstack.end-text.Addr]
	const ax, dx, bx, sp, bp = 0, 2, 3, 4, 5
	tls := []byte{0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(tls[5:], uint32(int32(l.tlsG)))
	for _, c := range []struct {
		what string
		insn []byte
	}{
		{"MOVQ FS:tlsG, AX", tls},
		{"MOVQ g_m(AX), BX", modRM(0x8b, bx, ax, l.gM)},
		{"CMPQ AX, m_curg(BX)", modRM(0x3b, ax, bx, l.mCurg)},
		{"MOVQ (g_sched+gobuf_sp)(DX), SP", modRM(0x8b, sp, dx, l.gSched+l.bufSP)},
		{"MOVQ (g_sched+gobuf_bp)(AX), BP", modRM(0x8b, bp, ax, l.gSched+l.bufBP)},
	} {
		if !bytes.Contains(fn, c.insn) {
			t.Errorf("runtime.systemstack has no %s (% x): the offsets from DWARF disagree with the runtime's code", c.what, c.insn)
		}
	}
	if l.mG0 != 0 {
		t.Errorf("m.g0 at %d, want 0 (systemstack reads it as 0(BX))", l.mG0)
	}
	if l.morestack.end == 0 {
		t.Errorf("runtime.morestack not found")
	}
}

// TestLoadGoprogARM64 builds goprog for arm64 and checks the offsets its
// DWARF gives against the stores of g.sched in runtime.mcall and
// runtime.morestack, which the Go assembler built from go_asm.h:
//
//	mcall:     MOVD R29, (g_sched+gobuf_bp)(g)   MOVD LR, (g_sched+gobuf_pc)(g)
//	morestack: MOVD R3, (g_sched+gobuf_lr)(g)    MOVD LR, (g_sched+gobuf_pc)(g)
//
// (g is x28; each is an STR Xt, [x28, #off].)
func TestLoadGoprogARM64(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not installed")
	}
	out := filepath.Join(t.TempDir(), "goprog-arm64")
	build := exec.Command(goTool, "build", "-trimpath", "-buildvcs=false", "-o", out, ".")
	root, err := targets.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	build.Dir = filepath.Join(root, "testdata", "targets", "goprog")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build goprog for arm64: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	str := func(rt, off uint64) []byte {
		b := make([]byte, 4)
		binary.LittleEndian.PutUint32(b, uint32(0xf9000000|(off/8)<<10|arm64G<<5|rt))
		return b
	}
	for _, c := range []struct {
		fn   string
		r    funcRange
		what string
		insn []byte
	}{
		{"mcall", l.mcall, "MOVD R29, (g_sched+gobuf_bp)(g)", str(29, l.gSched+l.bufBP)},
		{"mcall", l.mcall, "MOVD LR, (g_sched+gobuf_pc)(g)", str(30, l.gSched+l.bufPC)},
		{"morestack", l.morestack, "MOVD R3, (g_sched+gobuf_lr)(g)", str(3, l.gSched+l.bufLR)},
		{"morestack", l.morestack, "MOVD LR, (g_sched+gobuf_pc)(g)", str(30, l.gSched+l.bufPC)},
	} {
		if c.r.end == 0 {
			t.Errorf("runtime.%s not found", c.fn)
			continue
		}
		fn := code[c.r.start-text.Addr : c.r.end-text.Addr]
		if !bytes.Contains(fn, c.insn) {
			t.Errorf("runtime.%s has no %s (% x): the offsets from DWARF disagree with the runtime's code", c.fn, c.what, c.insn)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	t.Run("not Go", func(t *testing.T) {
		if _, err := Load(openTarget(t, "chains-fp")); !errors.Is(err, ErrNotGo) {
			t.Errorf("Load(chains-fp) = %v, want ErrNotGo", err)
		}
		if _, err := LoadFuncs(openTarget(t, "chains-fp")); !errors.Is(err, ErrNotGo) {
			t.Errorf("LoadFuncs(chains-fp) = %v, want ErrNotGo", err)
		}
	})
	t.Run("no DWARF", func(t *testing.T) {
		objcopy, err := exec.LookPath("objcopy")
		if err != nil {
			t.Skip("objcopy not installed")
		}
		out := filepath.Join(t.TempDir(), "goprog-nodwarf")
		if b, err := exec.Command(objcopy, "--strip-debug", targets.Path("goprog"), out).CombinedOutput(); err != nil {
			t.Fatalf("objcopy: %v\n%s", err, b)
		}
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Machine != elf.EM_X86_64 {
			t.Skip("goprog is not an x86-64 binary")
		}
		if _, err := Load(f); !errors.Is(err, ErrNoDWARF) {
			t.Errorf("Load(stripped goprog) = %v, want ErrNoDWARF", err)
		}
		// The symbols still say where the switches are.
		fs, err := LoadFuncs(f)
		if err != nil {
			t.Fatal(err)
		}
		l, err := Load(openTarget(t, "goprog"))
		if err != nil {
			t.Fatal(err)
		}
		if *fs != l.Funcs || fs.stoplockedm.end == 0 {
			t.Errorf("LoadFuncs(stripped goprog) = %+v, want %+v", *fs, l.Funcs)
		}
		for _, c := range []struct {
			name   string
			vaddrs []uint64
			want   bool
		}{
			{"systemstack", []uint64{0x10, l.systemstack.start}, true},
			{"morestack", []uint64{l.morestack.end - 1}, true},
			{"mcall, locked", []uint64{0x10, l.stoplockedm.start + 4, l.mcall.start + 8}, true},
			{"mcall, idle", []uint64{0x10, l.mcall.start + 8}, false},
			{"systemstack not last", []uint64{l.systemstack.start, 0x10}, false},
			{"empty", nil, false},
		} {
			if got := fs.Missed(c.vaddrs); got != c.want {
				t.Errorf("Missed(%s) = %v, want %v", c.name, got, c.want)
			}
		}
	})
}

// FuzzLoad: any bytes that debug/elf accepts give a Layout or an error.
func FuzzLoad(f *testing.F) {
	fuzzbudget.Limit(f) // structured binary inputs: bound minimisation
	if b, err := os.ReadFile(targets.Path("goprog")); err == nil && len(b) > 512 {
		f.Add(b[:512]) // the ELF header and program headers
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		Load(ef)
	})
}

// testLayout is a layout with the offsets of some Go release, for the
// switcher's fuzz target (which needs no binary).
var testLayout = &Layout{
	Arch: regs.AMD64,
	Funcs: Funcs{
		systemstack: funcRange{0x1000, 0x1100},
		morestack:   funcRange{0x1100, 0x1200},
		mcall:       funcRange{0x1200, 0x1240},
	},
	tlsG:   -8,
	gStack: 0, stackLo: 0, stackHi: 8, gM: 48, gSched: 56,
	mG0: 0, mCurg: 184, mLockedg: 192,
	bufSP: 0, bufPC: 8, bufBP: 40, bufLR: 32,
}

const base = 0x10000

// switchMem is a Go thread's state for testLayout: the thread pointer is
// base+8 and the g slot below it holds g0, whose m runs the goroutine curg
// (stack [0x40000, 0x50000), sched sp 0x4ff00 pc 0x1234 bp 0x4ff80); g0's
// stack is [0x20000, 0x30000).
func switchMem() []byte {
	mem := make([]byte, 0x400)
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(mem[addr-base:], v) }
	g0, m, curg := uint64(base+0x100), uint64(base+0x200), uint64(base+0x300)
	put(base, g0) // the g slot
	put(g0, 0x20000)
	put(g0+8, 0x30000)
	put(g0+48, m)
	put(m, g0)
	put(m+184, curg)
	put(curg, 0x40000)
	put(curg+8, 0x50000)
	put(curg+56, 0x4ff00) // sched.sp
	put(curg+64, 0x1234)  // sched.pc
	put(curg+96, 0x4ff80) // sched.bp
	put(curg+88, 0x1310)  // sched.lr
	return mem
}

func switchAt(mem []byte, pc, sp uint64, exact bool) (cur, next regs.Set, b unwind.StackBounds, sw unwind.Switch) {
	s := testLayout.Switcher(0)
	thread := regs.Set{Arch: regs.AMD64, PC: pc, TLS: base + 8}
	thread.Put(regs.AMD64RSP, sp)
	cur = thread
	w := &unwind.StackWindow{Base: base, Bytes: mem}
	b, sw = s.SwitchStack(&thread, &cur, exact, w, binary.LittleEndian, &next)
	return
}

func TestSwitchStack(t *testing.T) {
	mem := switchMem()
	goStack := unwind.StackBounds{Low: 0x40000, High: 0x50000}
	// systemstack's frame on g0: its SP and BP become sched's.
	cur, _, b, sw := switchAt(mem, 0x1050, 0x2ff00, false)
	if sw != unwind.SwitchRegs || cur.SP() != 0x4ff00 || cur.FP() != 0x4ff80 || b != goStack {
		t.Errorf("systemstack on g0: %v sp %#x fp %#x bounds %+v", sw, cur.SP(), cur.FP(), b)
	}
	// morestack's frame on g0: f (sched.pc) is the caller.
	_, next, b, sw := switchAt(mem, 0x1150, 0x2ff00, true)
	if sw != unwind.SwitchCaller || next.PC != 0x1234 || next.SP() != 0x4ff00 || next.FP() != 0x4ff80 || b != goStack {
		t.Errorf("morestack on g0: %v pc %#x sp %#x fp %#x bounds %+v", sw, next.PC, next.SP(), next.FP(), b)
	}
	// The morestack switch, then the step from f at its entry: f's
	// return address is at sched.sp.
	{
		sw := testLayout.Switcher(0)
		ra := make([]byte, 8)
		binary.LittleEndian.PutUint64(ra, 0x1300)
		w := &unwind.StackWindow{Base: base, Bytes: mem, Fallback: &unwind.StackWindow{Base: 0x4ff00, Bytes: ra}}
		thread := regs.Set{Arch: regs.AMD64, PC: 0x1150, TLS: base + 8}
		thread.Put(regs.AMD64RSP, 0x2ff00)
		cur, next := thread, regs.Set{}
		if _, k := sw.SwitchStack(&thread, &cur, true, w, binary.LittleEndian, &next); k != unwind.SwitchCaller {
			t.Fatalf("morestack: %v", k)
		}
		f := next
		b, k := sw.SwitchStack(&thread, &f, false, w, binary.LittleEndian, &next)
		if k != unwind.SwitchCaller || next.PC != 0x1300 || next.SP() != 0x4ff08 || next.FP() != 0x4ff80 || b != goStack {
			t.Errorf("f at its entry: %v pc %#x sp %#x fp %#x bounds %+v", k, next.PC, next.SP(), next.FP(), b)
		}
		// A new walk forgets it.
		other := thread
		other.PC = 0x1250
		if _, k := sw.SwitchStack(&other, &other, true, w, binary.LittleEndian, &next); k != unwind.SwitchNone {
			t.Errorf("frame 0 outside systemstack and morestack: %v", k)
		}
		if _, k := sw.SwitchStack(&other, &f, false, w, binary.LittleEndian, &next); k != unwind.SwitchNone {
			t.Errorf("f in a new walk: %v, want no switch", k)
		}
	}
	for _, c := range []struct {
		name   string
		pc, sp uint64
		mem    func([]byte)
	}{
		{"systemstack before the switch", 0x1050, 0x4fe00, nil},
		{"another function", 0x1250, 0x2ff00, nil},
		{"g is not g0", 0x1050, 0x2ff00, func(m []byte) { binary.LittleEndian.PutUint64(m[0:], base+0x300) }},
		{"no curg", 0x1050, 0x2ff00, func(m []byte) { binary.LittleEndian.PutUint64(m[0x200+184:], 0) }},
		{"sched.sp off curg's stack", 0x1050, 0x2ff00, func(m []byte) { binary.LittleEndian.PutUint64(m[0x300+56:], 0x60000) }},
		{"g slot unreadable", 0x1050, 0x2ff00, func(m []byte) { binary.LittleEndian.PutUint64(m[0:], 0x90000) }},
	} {
		m := switchMem()
		if c.mem != nil {
			c.mem(m)
		}
		if _, _, _, sw := switchAt(m, c.pc, c.sp, false); sw != unwind.SwitchNone {
			t.Errorf("%s: %v, want no switch", c.name, sw)
		}
	}
}

// TestSwitchStackMcall: a thread in mcall's function on g0 continues at
// mcall's caller on the goroutine's stack, from m.curg, or from m.lockedg
// once park_m dropped m.curg; an unlocked goroutine m.curg dropped is not
// followed (it may run on another thread by now).
func TestSwitchStackMcall(t *testing.T) {
	goStack := unwind.StackBounds{Low: 0x40000, High: 0x50000}
	dropCurg := func(m []byte) { binary.LittleEndian.PutUint64(m[0x200+184:], 0) }
	lock := func(m []byte) { binary.LittleEndian.PutUint64(m[0x200+192:], base+0x300) }
	for _, c := range []struct {
		name string
		mem  []func([]byte)
		want unwind.Switch
	}{
		{"curg", nil, unwind.SwitchCaller},
		{"locked, curg dropped", []func([]byte){dropCurg, lock}, unwind.SwitchCaller},
		{"unlocked, curg dropped", []func([]byte){dropCurg}, unwind.SwitchNone},
	} {
		m := switchMem()
		for _, f := range c.mem {
			f(m)
		}
		_, next, b, sw := switchAt(m, 0x1230, 0x2ff00, false)
		if sw != c.want {
			t.Errorf("%s: %v, want %v", c.name, sw, c.want)
			continue
		}
		if sw == unwind.SwitchNone {
			continue
		}
		// amd64's mcall saves its caller's caller's BP: the caller's is
		// left unknown for its CFI row to restore.
		if _, fpKnown := next.Get(regs.AMD64RBP); next.PC != 0x1234 || next.SP() != 0x4ff00 || fpKnown || b != goStack {
			t.Errorf("%s: pc %#x sp %#x fp known %v bounds %+v", c.name, next.PC, next.SP(), fpKnown, b)
		}
	}
	// systemstack runs on behalf of m.curg only: a locked goroutine that is
	// not curg is not its caller.
	m := switchMem()
	dropCurg(m)
	lock(m)
	if _, _, _, sw := switchAt(m, 0x1050, 0x2ff00, false); sw != unwind.SwitchNone {
		t.Errorf("systemstack without curg: %v, want no switch", sw)
	}
}

// TestSwitchStackARM64: on arm64 g is x28; mcall's caller has sched.bp as
// its frame record; morestack's f is at sched.pc and f's caller, whose
// return address f's prologue moved to R3, at sched.lr with f's entry SP.
func TestSwitchStackARM64(t *testing.T) {
	l := *testLayout
	l.Arch = regs.ARM64
	goStack := unwind.StackBounds{Low: 0x40000, High: 0x50000}
	at := func(s *Switcher, mem []byte, pc, sp uint64, exact bool, cur *regs.Set) (regs.Set, unwind.StackBounds, unwind.Switch) {
		thread := regs.Set{Arch: regs.ARM64, PC: pc}
		thread.Put(regs.ARM64SP, sp)
		thread.Put(arm64G, base+0x100)
		if cur == nil {
			c := thread
			cur = &c
		}
		var next regs.Set
		b, sw := s.SwitchStack(&thread, cur, exact, &unwind.StackWindow{Base: base, Bytes: mem}, binary.LittleEndian, &next)
		return next, b, sw
	}
	mem := switchMem()
	next, b, sw := at(l.Switcher(0), mem, 0x1230, 0x2ff00, false, nil)
	if sw != unwind.SwitchCaller || next.PC != 0x1234 || next.SP() != 0x4ff00 || next.FP() != 0x4ff80 || b != goStack {
		t.Errorf("mcall: %v pc %#x sp %#x fp %#x bounds %+v", sw, next.PC, next.SP(), next.FP(), b)
	}
	s := l.Switcher(0)
	f, b, sw := at(s, mem, 0x1150, 0x2ff00, true, nil)
	if sw != unwind.SwitchCaller || f.PC != 0x1234 || f.SP() != 0x4ff00 || f.FP() != 0x4ff80 || b != goStack {
		t.Fatalf("morestack: %v pc %#x sp %#x fp %#x bounds %+v", sw, f.PC, f.SP(), f.FP(), b)
	}
	next, b, sw = at(s, mem, 0x1150, 0x2ff00, false, &f)
	if sw != unwind.SwitchCaller || next.PC != 0x1310 || next.SP() != 0x4ff00 || next.FP() != 0x4ff80 || b != goStack {
		t.Errorf("f at its entry: %v pc %#x sp %#x fp %#x bounds %+v", sw, next.PC, next.SP(), next.FP(), b)
	}
	// x28 not a g0 (other code's frame 0): no switch.
	thread := regs.Set{Arch: regs.ARM64, PC: 0x1230}
	thread.Put(regs.ARM64SP, 0x2ff00)
	thread.Put(arm64G, base+0x300)
	cur := thread
	var n regs.Set
	if _, sw := l.Switcher(0).SwitchStack(&thread, &cur, false, &unwind.StackWindow{Base: base, Bytes: mem}, binary.LittleEndian, &n); sw != unwind.SwitchNone {
		t.Errorf("x28 is curg: %v, want no switch", sw)
	}
}

// FuzzSwitchStack: the switcher reads g, m and g.sched from the target's
// memory, which may hold anything. Whatever it reads, it must not panic,
// and a switch must land on the goroutine's stack it reports.
func FuzzSwitchStack(f *testing.F) {
	fuzzbudget.Limit(f)
	mem := switchMem()
	f.Add(mem, uint64(0x1050), uint64(0x2ff00), false)
	f.Add(mem, uint64(0x1150), uint64(0x2ff00), true)
	f.Add(mem, uint64(0x1230), uint64(0x2ff00), false)
	f.Fuzz(func(t *testing.T, mem []byte, pc, sp uint64, exact bool) {
		cur, next, b, sw := switchAt(mem, pc, sp, exact)
		var got uint64
		switch sw {
		case unwind.SwitchNone:
			return
		case unwind.SwitchRegs:
			got = cur.SP()
		case unwind.SwitchCaller:
			got = next.SP()
		}
		if got < b.Low || got >= b.High+8 {
			t.Errorf("switch to SP %#x outside the goroutine's stack [%#x, %#x)", got, b.Low, b.High)
		}
	})
}

// TestTLSOffset: where g lives from fs_base in the three kinds of amd64
// executables (TLS variant II: the block ends at the thread pointer).
func TestTLSOffset(t *testing.T) {
	tls := func(memsz, align uint64) *elf.File {
		return &elf.File{Progs: []*elf.Prog{{ProgHeader: elf.ProgHeader{Type: elf.PT_TLS, Memsz: memsz, Align: align}}}}
	}
	for _, c := range []struct {
		name string
		f    *elf.File
		tlsg *elf.Symbol
		want int64
	}{
		{"Go linker, no PT_TLS", &elf.File{}, nil, -8},
		{"Go linker PIE: one slot, no runtime.tlsg", tls(8, 8), nil, -8},
		{"external: runtime.tlsg in a larger block", tls(20, 16), &elf.Symbol{Value: 8}, 8 - 32},
	} {
		got, err := tlsOffset(c.f, c.tlsg)
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}
