package unwind

import "codeberg.org/stacktop/stacktop/regs"

// s390x signal frames. A handler returns through a trampoline (the vDSO's
// __kernel_rt_sigreturn, glibc's restorer, or the two bytes the kernel
// wrote into the frame itself) that is one system call: svc 173
// (rt_sigreturn) or svc 119 (sigreturn, handlers without SA_SIGINFO on
// old kernels). At that point SP is the frame the kernel built (arch/s390
// kernel/signal.c):
//
//	rt_sigframe: callee_used_stack[160]; u16 svc_insn; struct siginfo
//	  (128 bytes, 8-aligned: at 168); struct ucontext at 296: uc_flags,
//	  uc_link, uc_stack (24 bytes), then uc_mcontext (_sigregs) at 336:
//	  psw {mask, addr}, gprs[16].
//	sigframe: callee_used_stack[160]; struct sigcontext {oldmask, sregs
//	  pointer} at 160; _sigregs at 176: psw {mask, addr}, gprs[16].
//
// Every general register of the interrupted code is restored; its PC is
// the PSW address.
var (
	svcRtSigreturnS390X = []byte{0x0a, 0xad} // svc 173
	svcSigreturnS390X   = []byte{0x0a, 0x77} // svc 119
)

const (
	s390xRtSigregs = 160 + 8 + 128 + 40 // uc_mcontext in rt_sigframe
	s390xSigregs   = 160 + 16           // sregs in sigframe
)

// s390xSignalStep reads the interrupted registers from the frame at sp;
// cur's PC is the trampoline, whose instruction says which frame it is.
func (w *Walker) s390xSignalStep(cur, next *regs.Set, sp uint64) stepFail {
	base := uint64(s390xRtSigregs)
	var insn [2]byte
	if n, _ := w.mem.ReadAt(insn[:], int64(cur.PC)); n == 2 && string(insn[:]) == string(svcSigreturnS390X) {
		base = s390xSigregs
	}
	var vals [18]uint64 // psw mask, psw addr, gprs 0-15
	for i := range vals {
		v, f := w.word(sp + base + 8*uint64(i))
		if f.err != nil {
			return f
		}
		vals[i] = v
	}
	reset(next, regs.S390X, vals[1])
	for n := 0; n < 16; n++ {
		next.Put(n, vals[2+n])
	}
	return stepFail{}
}
