# x86-64 features only SFrame V3 (binutils 2.46+) can describe: flexible FDEs
# for DRAP and register-saved return addresses, outermost frames
# (.cfi_undefined rip) and signal trampolines (.cfi_signal_frame).
	.text

# Outermost frame: RA undefined from the first instruction on.
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	.cfi_undefined %rip
	xorl	%ebp, %ebp
	movq	%rsp, %rdi
	andq	$-16, %rsp
	call	drap
	call	realign
	call	ra_in_reg
	hlt
	.cfi_endproc
	.size	_start, .-_start

# DRAP exactly as GCC 12 -O2 emits it for
#   long drap(long n) { char buf[n]; char x[64] __attribute__((aligned(64)));
#                       g(buf, x, n); return buf[0] + x[1]; }
# CFA = r10+0 while the DRAP register holds it, then CFA = *(rbp-8) once it is
# spilled (DW_CFA_def_cfa_expression), FP = *(rbp+0) (DW_CFA_expression).
# GCC emits no rule for rbp after "leave"; the flex FDE keeps "(fp+0)".
	.globl	drap
	.type	drap, @function
drap:
	.cfi_startproc
	leaq	8(%rsp), %r10
	.cfi_def_cfa 10, 0
	andq	$-64, %rsp
	leaq	15(%rdi), %rax
	movq	%rdi, %rdx
	pushq	-8(%r10)
	andq	$-16, %rax
	pushq	%rbp
	movq	%rsp, %rbp
	.cfi_escape 0x10,0x6,0x2,0x76,0
	pushq	%r10
	.cfi_escape 0xf,0x3,0x76,0x78,0x6
	leaq	-112(%rbp), %rsi
	subq	$104, %rsp
	subq	%rax, %rsp
	movq	%rsp, %rdi
	call	g
	movsbl	(%rsp), %eax
	movsbl	-111(%rbp), %edx
	movq	-8(%rbp), %r10
	.cfi_def_cfa 10, 0
	leave
	addl	%edx, %eax
	cltq
	leaq	-8(%r10), %rsp
	.cfi_def_cfa 7, 8
	ret
	.cfi_endproc
	.size	drap, .-drap

	.type	g, @function
g:
	.cfi_startproc
	ret
	.cfi_endproc
	.size	g, .-g

# Stack realignment with a frame pointer (no DRAP): CFA stays rbp+16.
	.globl	realign
	.type	realign, @function
realign:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	andq	$-64, %rsp
	subq	$128, %rsp
	leave
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	realign, .-realign

# Return address moved to a register: RA = rbx (flex FDE, "r3+0").
	.globl	ra_in_reg
	.type	ra_in_reg, @function
ra_in_reg:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset %rbx, -16
	movq	8(%rsp), %rbx
	.cfi_register %rip, %rbx
	nop
	.cfi_offset %rip, -8
	popq	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore %rbx
	ret
	.cfi_endproc
	.size	ra_in_reg, .-ra_in_reg

# Signal trampoline (like glibc's __restore_rt): V3 marks the FDE with the
# signal bit ("S"); the frame layout itself is the kernel's rt_sigframe.
	.globl	sig_tramp
	.type	sig_tramp, @function
	nop
sig_tramp:
	.cfi_startproc
	.cfi_signal_frame
	.cfi_def_cfa_offset 8
	movq	$15, %rax
	syscall
	.cfi_endproc
	.size	sig_tramp, .-sig_tramp
