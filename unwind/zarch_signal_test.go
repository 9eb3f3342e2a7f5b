package unwind

import (
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

// bar is interrupted at bar+10 by a signal; the handler (a leaf, RA in
// r14) returns to a trampoline (svc 173, or svc 119 with a non-rt frame)
// whose SP is the frame the kernel built: the walk goes through it to
// bar's exact PC, restored with every register, and on to _start.
func TestS390XSignalFrame(t *testing.T) {
	const (
		handler = 0x500000
		tramp   = 0x500080
	)
	for _, rt := range []bool{true, false} {
		s, r, want := s390Program(10)
		barSP := r.SP()
		frameSP := barSP - 0x300
		base, svc := uint64(s390xRtSigregs), svcRtSigreturnS390X
		if !rt {
			base, svc = s390xSigregs, svcSigreturnS390X
		}
		s.put(frameSP+base, 0x0705000180000000) // psw mask
		s.put(frameSP+base+8, r.PC)             // psw addr
		for n := 0; n < 16; n++ {
			v, _ := r.Get(n)
			s.put(frameSP+base+16+8*uint64(n), v)
		}
		code := make([]byte, 0x100)
		copy(code[tramp-handler:], svc)
		mem := &leafMem{stack: s.window(), base: handler, code: code}
		hrows := &fakeRows{}
		hrows.add(handler, handler+0x40, s390Entry)
		mods := NewModuleList(s390Module(s390Rows()), Module{Start: handler, End: handler + 0x100, Rows: hrows, Path: "/lib/libc.so"})

		hr := regs.Set{Arch: regs.S390X, PC: handler + 0x10}
		hr.Put(regs.S390XSP, frameSP)
		hr.Put(regs.S390XRA, tramp)
		st := Walk(hr, mem, mods, Options{Stack: s.bounds()})
		wantAll := append([]wantFrame{
			{handler + 0x10, frameSP, MethodRegs},
			{tramp, frameSP, MethodSFrame},
			{want[0].pc, barSP, MethodSignal},
		}, want[1:]...)
		if len(st.Frames) != len(wantAll) {
			t.Errorf("rt=%v: %d frames, want %d (%v)", rt, len(st.Frames), len(wantAll), st.Err)
		}
		for i := 0; i < len(st.Frames) && i < len(wantAll); i++ {
			f, w := st.Frames[i], wantAll[i]
			if f.PC != w.pc || f.Method != w.method || f.SP != w.sp {
				t.Errorf("rt=%v frame %d = {%#x %#x %v}, want {%#x %#x %v}", rt, i, f.PC, f.SP, f.Method, w.pc, w.sp, w.method)
			}
		}
		if len(st.Frames) < 3 || !st.Frames[2].Exact {
			t.Errorf("rt=%v: the interrupted frame is not exact", rt)
		}
		checkStop(t, st, nil, 0)
	}
}
