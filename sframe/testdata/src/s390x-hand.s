# s390x, hand-written in GCC's style: the entry point (outermost frame,
# .cfi_undefined r14), a leaf that keeps its return address in f0 (what GCC
# emits when a leaf needs r14 as a scratch register: ldgr %f0,%r14 /
# .cfi_register 14, 16), a stub "ext" for the C part, and a signal
# trampoline (.cfi_signal_frame, like the vDSO's __kernel_rt_sigreturn).
	.machinemode zarch
	.machine "z196"
	.text
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	.cfi_undefined 14
	lghi	%r11,0
	lghi	%r2,3
	brasl	%r14,caller
	brasl	%r14,ra_in_fpr
	lghi	%r1,1
	svc	0
	.cfi_endproc
	.size	_start, .-_start

	.globl	ra_in_fpr
	.type	ra_in_fpr, @function
ra_in_fpr:
	.cfi_startproc
	ldgr	%f0,%r14
	.cfi_register 14, 16
	ldgr	%f2,%r11
	.cfi_register 11, 17
	lghi	%r14,7
	lghi	%r11,9
	agrk	%r2,%r14,%r11
	lgdr	%r11,%f2
	.cfi_restore 11
	lgdr	%r14,%f0
	.cfi_restore 14
	br	%r14
	.cfi_endproc
	.size	ra_in_fpr, .-ra_in_fpr

	.globl	ext
	.type	ext, @function
ext:
	.cfi_startproc
	lg	%r2,0(%r2)
	br	%r14
	.cfi_endproc
	.size	ext, .-ext

	.globl	sig_tramp
	.type	sig_tramp, @function
	nopr
sig_tramp:
	.cfi_startproc
	.cfi_signal_frame
	svc	173
	.cfi_endproc
	.size	sig_tramp, .-sig_tramp
