package unwind

import (
	"debug/elf"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

// crossProgram is a cross-compiled testdata/cross/spin.c: its text and
// function symbols.
type crossProgram struct {
	text     []byte
	textAddr uint64
	funcs    map[string]elf.Symbol
}

func buildCross(t *testing.T, gcc string, flags ...string) *crossProgram {
	t.Helper()
	if _, err := exec.LookPath(gcc); err != nil {
		t.Skipf("%s not installed", gcc)
	}
	bin := filepath.Join(t.TempDir(), "spin")
	args := append([]string{"-std=gnu11", "-O2", "-static", "-pthread", "-fno-stack-protector", "-o", bin, "../testdata/cross/spin.c"}, flags...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Skipf("%s: %v\n%s", gcc, err, out) // no cross libc
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".text")
	text, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	p := &crossProgram{text: text, textAddr: sec.Addr, funcs: map[string]elf.Symbol{}}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
			p.funcs[s.Name] = s
		}
	}
	return p
}

func (p *crossProgram) funcAt(pc uint64) (uint64, uint64, bool) {
	for _, s := range p.funcs {
		if pc >= s.Value && pc < s.Value+s.Size {
			return s.Value, s.Value + s.Size, true
		}
	}
	return 0, 0, false
}

func (p *crossProgram) code(fn string) (uint64, []byte) {
	s := p.funcs[fn]
	return s.Value, p.text[s.Value-p.textAddr : s.Value-p.textAddr+s.Size]
}

// a64CallTo finds the BL in fn that calls target; it returns the return
// address.
func (p *crossProgram) a64CallTo(t *testing.T, fn, target string) uint64 {
	addr, code := p.code(fn)
	for i := 0; i+4 <= len(code); i += 4 {
		insn := binary.LittleEndian.Uint32(code[i:])
		if insn&0xfc000000 != 0x94000000 {
			continue
		}
		off := int64(int32(insn<<6)>>6) * 4
		if uint64(int64(addr)+int64(i)+off) == p.funcs[target].Value {
			return addr + uint64(i) + 4
		}
	}
	t.Skipf("no bl %s in %s", target, fn)
	return 0
}

// gcc's arm64 output with frame pointers but none in leaves (its default
// -momit-leaf-frame-pointer), no unwind tables used: spin_leaf keeps its
// caller's return address in x30 and x29 at leaf_caller's record. The
// frame-pointer walk alone loses leaf_caller; the link-register rule,
// reading the real BL before x30 and the real symbol sizes, keeps it.
func TestARM64LeafRealCode(t *testing.T) {
	p := buildCross(t, "aarch64-linux-gnu-gcc", "-fno-omit-frame-pointer")
	_, leaf := p.code("spin_leaf")
	for i := 0; i+4 <= len(leaf); i += 4 {
		if binary.LittleEndian.Uint32(leaf[i:])&0xffc07fff == 0xa9807bfd { // stp x29, x30, [sp, #-N]!
			t.Skip("spin_leaf has a frame record in this build")
		}
	}
	raCaller := p.a64CallTo(t, "leaf_caller", "spin_leaf")
	raThread := p.a64CallTo(t, "leaf_thread", "leaf_caller")

	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	fpThread := s.high() - 0x40
	s.put(fpThread, 0) // leaf_thread's record: the outermost here
	s.put(fpThread+8, 0)
	fpCaller := fpThread - 0x40
	s.put(fpCaller, fpThread)
	s.put(fpCaller+8, raThread)
	sp := fpCaller - 0x50 // spin_leaf: sub sp, sp, #0x50
	r := regs.Set{Arch: regs.ARM64, PC: p.funcs["spin_leaf"].Value + 0x18}
	r.Put(regs.ARM64SP, sp)
	r.Put(regs.ARM64FP, fpCaller)
	r.Put(regs.ARM64LR, raCaller)
	mem := &leafMem{stack: s.window(), base: p.textAddr, code: p.text}
	mods := NewModuleList(Module{Start: p.textAddr, End: p.textAddr + uint64(len(p.text)), Path: "spin-arm64-fp"})

	old := Walk(r, mem, mods, Options{Stack: s.bounds()})
	if len(old.Frames) < 2 || old.Frames[1].PC != raThread {
		t.Errorf("without FuncAt: frames %+v, want leaf_caller skipped", old.Frames)
	}
	st := Walk(r, mem, mods, Options{Stack: s.bounds(), FuncAt: p.funcAt})
	checkFrames(t, st, []wantFrame{{r.PC, sp, MethodRegs}, {raCaller, 0, MethodLinkReg}, {raThread, fpCaller + 16, MethodFP}})
	checkStop(t, st, nil, 0)
}
