# Hand-written functions for chains.c whose CFI describes a frame that is
# only half built when the thread is caught. gas turns the .cfi_* directives
# into .eh_frame and, with --gsframe, into SFrame rows.
#
# void asm_prologue_spin(volatile unsigned long *counter, int busy)
#   spins after `push %rbp` and before `mov %rsp,%rbp`: CFA = rsp + 16,
#   the caller's rbp saved at CFA - 16, rbp still the caller's.
# void asm_entry_spin(volatile unsigned long *counter, int busy)
#   spins at its first instructions: CFA = rsp + 8, nothing saved.
#
# Both count in *counter and, unless busy, nap 1 ms (raw nanosleep) every
# 16384 iterations.

	.file	"chains_asm.s"
	.text

	.globl	asm_prologue_spin
	.type	asm_prologue_spin, @function
	.p2align 4
asm_prologue_spin:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rdi, %r8
	movl	%esi, %r9d
.Lprologue_loop:
	incq	(%r8)
	testl	%r9d, %r9d
	jnz	.Lprologue_loop
	testq	$0x3fff, (%r8)
	jnz	.Lprologue_loop
	movl	$35, %eax		# SYS_nanosleep
	leaq	asm_nap(%rip), %rdi
	xorl	%esi, %esi
	syscall
	jmp	.Lprologue_loop
	# Never reached: the rest of an ordinary frame-pointer prologue and
	# epilogue, so the CFI (and SFrame) has rbp-based rows after the loop.
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	asm_prologue_spin, .-asm_prologue_spin

	.globl	asm_entry_spin
	.type	asm_entry_spin, @function
	.p2align 4
asm_entry_spin:
	.cfi_startproc
.Lentry_loop:
	incq	(%rdi)
	testl	%esi, %esi
	jnz	.Lentry_loop
	testq	$0x3fff, (%rdi)
	jnz	.Lentry_loop
	movq	%rdi, %r8
	movl	$35, %eax		# SYS_nanosleep
	leaq	asm_nap(%rip), %rdi
	xorl	%esi, %esi		# busy was 0 to get here
	syscall
	movq	%r8, %rdi
	jmp	.Lentry_loop
	ret
	.cfi_endproc
	.size	asm_entry_spin, .-asm_entry_spin

	.section .rodata
	.p2align 3
asm_nap:
	.quad	0			# tv_sec
	.quad	1000000			# tv_nsec: 1 ms

	.section .note.GNU-stack,"",@progbits
