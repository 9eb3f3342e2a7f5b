package unwind

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// These tests walk synthetic stacks through real .sframe sections: the
// fixtures of package sframe, made by GNU as/ld (see its testdata/README).
// The code addresses are the fixtures' own (from their disassembly); the
// stacks are what that code would have built.

// fixtureModule opens testdata of package sframe and returns its module,
// loaded at bias: the executable PT_LOAD range and the parsed .sframe.
func fixtureModule(t *testing.T, name string, bias uint64) Module {
	t.Helper()
	f, err := elf.Open(filepath.Join("..", "sframe", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec, err := sframe.FromELF(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			return Module{Start: p.Vaddr + bias, End: p.Vaddr + p.Memsz + bias, Bias: bias, SFrame: sec, Path: name}
		}
	}
	t.Fatalf("%s: no executable segment", name)
	return Module{}
}

// x86_64-v3-flex.exe: _start (RA undefined) calls drap (GCC's DRAP code:
// CFA = *(rbp-8), FP = *(rbp+0), RA a padding word meaning the header's
// fixed -8), which calls g, a leaf.
func TestFixtureAMD64DRAP(t *testing.T) {
	for _, bias := range []uint64{0, 0x7f0000000000} {
		t.Run(fmt.Sprintf("bias=%#x", bias), func(t *testing.T) {
			mod := fixtureModule(t, "x86_64-v3-flex.exe", bias)
			s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
			s0 := uint64(stackLow + 0xf00) // _start's rsp after and $-16
			s.sp = s0
			s.push(0x4000be + bias) // 4000b9: call drap
			r10 := s.sp + 8         // 4000c9: lea 8(%rsp),%r10
			s.sp &^= 63             // 4000ce: and $-64,%rsp
			s.push(0x4000be + bias) // 4000d9: push -8(%r10)
			s.push(0)               // 4000e1: push %rbp (_start cleared it)
			rbp := s.sp             // 4000e2: mov %rsp,%rbp
			s.push(r10)             // 4000e5: push %r10
			s.sp -= 0x68 + 32       // sub $0x68,%rsp; sub %rax,%rsp
			spDrap := s.sp
			s.push(0x4000fa + bias) // 4000f5: call g
			r := amd64Regs(0x400110+bias, s.sp, rbp)

			st := Walk(r, s.window(), NewModuleList(mod), Options{Stack: s.bounds(), NoFramePointer: true})
			checkFrames(t, st, []wantFrame{
				{0x400110 + bias, s.sp, MethodRegs},
				{0x4000fa + bias, spDrap, MethodSFrame},
				{0x4000be + bias, s0, MethodSFrame},
			})
			checkStop(t, st, nil, 0)
		})
	}
}

// x86_64-v3-flex.exe: ra_in_reg keeps its return address in rbx (flex
// FDE, RA "r3+0"), usable in the topmost frame only while rbx is known.
func TestFixtureAMD64RAInRegister(t *testing.T) {
	mod := fixtureModule(t, "x86_64-v3-flex.exe", 0)
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	s0 := uint64(stackLow + 0xf00)
	s.sp = s0
	s.push(0x4000c8) // 4000c3: call ra_in_reg
	s.push(0x5555)   // 400122: push %rbx
	r := amd64Regs(0x400128, s.sp, 0)
	r.Put(3, 0x4000c8) // 400123: mov 8(%rsp),%rbx

	st := Walk(r, s.window(), NewModuleList(mod), Options{NoFramePointer: true})
	checkFrames(t, st, []wantFrame{{0x400128, s.sp, MethodRegs}, {0x4000c8, s0, MethodSFrame}})
	checkStop(t, st, nil, 0)

	r.Valid &^= 1 << 3
	st = Walk(r, s.window(), NewModuleList(mod), Options{NoFramePointer: true})
	checkStop(t, st, ErrRegUnknown, 0)

	// sig_tramp carries the V3 signal bit: not unwound (yet), and said so.
	st = Walk(amd64Regs(0x40012c, s.sp, 0), s.window(), NewModuleList(mod), Options{NoFramePointer: true})
	checkStop(t, st, ErrSignalFrame, 0)
}

// aarch64-v3.exe and its big-endian twin: _start calls pac_a (paciasp;
// frame record sp+32 c-32 c-24[s]) which calls leaf (sp+0 u u). _start
// has no .cfi_undefined x30 here, so its row "sp+0 u u" cannot describe
// a caller: the walk stops there with ErrRANotSaved, as it must.
func TestFixtureARM64PAC(t *testing.T) {
	for _, c := range []struct {
		name  string
		order binary.ByteOrder
	}{{"aarch64-v3.exe", binary.LittleEndian}, {"aarch64be-v3.exe", binary.BigEndian}} {
		t.Run(c.name, func(t *testing.T) {
			mod := fixtureModule(t, c.name, 0)
			s := newFakeStack(stackLow, 0x1000, c.order)
			s0 := uint64(stackLow + 0xf00)
			s.sp = s0
			// 4000b8: bl pac_a (x30 = 0x4000bc); 4000f0: paciasp;
			// 4000f4: stp x29,x30,[sp,#-32]!; 4000f8: mov x29,sp; 4000fc: bl leaf.
			s.sp -= 32
			s.put(s.sp, 0)
			s.put(s.sp+8, 0x4000bc|pacBits)
			spPacA := s.sp
			r := regs.Set{Arch: regs.ARM64, PC: 0x4000d8} // leaf: ret
			r.Put(regs.ARM64SP, s.sp)
			r.Put(regs.ARM64FP, s.sp)
			r.Put(regs.ARM64LR, 0x400100)

			// No ByteOrder option: the SFrame ABI of the module says it.
			st := Walk(r, s.window(), NewModuleList(mod), Options{NoFramePointer: true, PACMask: pacMask})
			checkFrames(t, st, []wantFrame{
				{0x4000d8, spPacA, MethodRegs},
				{0x400100, spPacA, MethodSFrame},
				{0x4000bc, s0, MethodSFrame},
			})
			checkStop(t, st, ErrRANotSaved, 2)
		})
	}
}

// aarch64-v3-outer.exe: _start has .cfi_undefined x30 (RA undefined), so
// the walk from worker ends Complete.
func TestFixtureARM64Outermost(t *testing.T) {
	mod := fixtureModule(t, "aarch64-v3-outer.exe", 0)
	s := newFakeStack(stackLow, 0x1000, binary.LittleEndian)
	s0 := uint64(stackLow + 0xf00)
	s.sp = s0 - 32 // 4000c0: stp x29,x30,[sp,#-32]!
	s.put(s.sp, 0)
	s.put(s.sp+8, 0x4000b8)                       // 4000b4: bl worker
	r := regs.Set{Arch: regs.ARM64, PC: 0x4000c8} // worker: nop
	r.Put(regs.ARM64SP, s.sp)
	r.Put(regs.ARM64FP, s.sp)
	r.Put(regs.ARM64LR, 0x4000b8)
	st := Walk(r, s.window(), NewModuleList(mod), Options{NoFramePointer: true})
	checkFrames(t, st, []wantFrame{{0x4000c8, s.sp, MethodRegs}, {0x4000b8, s0, MethodSFrame}})
	checkStop(t, st, nil, 0)
}

// s390x-v3.exe (big-endian, CFA offsets stored encoded): ext (leaf,
// sp+160 u u) called from with_fp (VLA: CFA fp+320 through r11, FP c-72,
// RA c-48), called from caller (sp+352 u c-48), called from _start (RA
// undefined). The brasl return addresses are the fixture's own.
func TestFixtureS390X(t *testing.T) {
	mod := fixtureModule(t, "s390x-v3.exe", 0)
	s := newFakeStack(stackLow, 0x1000, binary.BigEndian)
	r15Start := uint64(stackLow + 0xe00) // _start runs in the kernel-made frame
	// caller: stmg %r14,%r15,112(%r15); lay %r15,-192(%r15)
	s.put(r15Start+112, 0x100027e) // 1000278: brasl %r14,caller
	s.put(r15Start+120, r15Start)
	r15Caller := r15Start - 192
	// with_fp: stmg %r11,%r15,88(%r15); lay %r15,-160(%r15); lgr %r11,%r15
	r11Caller := uint64(0x1234)
	s.put(r15Caller+88, r11Caller)
	s.put(r15Caller+112, 0x10001fc) // 10001f6: brasl %r14,ext (a stand-in callee)
	s.put(r15Caller+120, r15Caller)
	r15WithFP := r15Caller - 160
	r11 := r15WithFP
	r15Ext := r15WithFP - 32                       // the VLA
	r := regs.Set{Arch: regs.S390X, PC: 0x10002ae} // ext: br %r14
	r.Put(regs.S390XSP, r15Ext)
	r.Put(regs.S390XFP, r11)
	r.Put(regs.S390XRA, 0x1000266) // 1000260: brasl %r14,ext

	st := Walk(r, s.window(), NewModuleList(mod), Options{Stack: s.bounds(), NoFramePointer: true})
	checkFrames(t, st, []wantFrame{
		{0x10002ae, r15Ext, MethodRegs},
		{0x1000266, r15Ext, MethodSFrame},
		{0x10001fc, r15Caller, MethodSFrame},
		{0x100027e, r15Start, MethodSFrame},
	})
	checkStop(t, st, nil, 0)

	// ra_in_fpr keeps its RA in f0 (DWARF 16) and r11 in f2 (17): known
	// only from the topmost frame's full register set.
	r = regs.Set{Arch: regs.S390X, PC: 0x1000298}
	r.Put(regs.S390XSP, r15Start)
	r.Put(regs.S390XFP, 9)
	r.Put(16, 0x1000284) // 100027e: brasl %r14,ra_in_fpr
	r.Put(17, 0)
	st = Walk(r, s.window(), NewModuleList(mod), Options{NoFramePointer: true})
	checkFrames(t, st, []wantFrame{{0x1000298, r15Start, MethodRegs}, {0x1000284, r15Start, MethodSFrame}})
	checkStop(t, st, nil, 0)
}
