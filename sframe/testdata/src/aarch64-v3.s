// aarch64 features only SFrame V3 (binutils 2.46+) can describe: the
// outermost frame (.cfi_undefined x30) and a signal trampoline
// (.cfi_signal_frame, like the vDSO's __kernel_rt_sigreturn).
	.text
	.globl	_start
	.type	_start, %function
_start:
	.cfi_startproc
	.cfi_undefined x30
	mov	x29, #0
	bl	worker
	mov	x8, #93
	svc	#0
	.cfi_endproc
	.size	_start, .-_start

	.globl	worker
	.type	worker, %function
worker:
	.cfi_startproc
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov	x29, sp
	nop
	ldp	x29, x30, [sp], #32
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	worker, .-worker

	nop
	.globl	sig_tramp
	.type	sig_tramp, %function
sig_tramp:
	.cfi_startproc
	.cfi_signal_frame
	mov	x8, #139
	svc	#0
	.cfi_endproc
	.size	sig_tramp, .-sig_tramp
