# x86-64 functions every SFrame version can describe (V1, V2, V3).
# Assembled with --gsframe by binutils 2.40, 2.44 and sid; see ../gen.sh.
	.text

# Entry point: no CFI on purpose beyond the initial row (V1/V2 have no
# outermost-frame rows; the V3-only fixture covers .cfi_undefined).
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	xorl	%ebp, %ebp
	call	fp_frame
	call	big_frame
	call	huge_frame
	call	long_func
	movl	$60, %eax
	xorl	%edi, %edi
	syscall
	hlt
	.cfi_endproc
	.size	_start, .-_start

# Leaf: one row, CFA = sp+8.
	.globl	leaf
	.type	leaf, @function
leaf:
	.cfi_startproc
	leal	1(%rdi), %eax
	ret
	.cfi_endproc
	.size	leaf, .-leaf

# Classic frame-pointer frame: sp+8 -> sp+16 (FP c-16) -> fp+16 -> sp+8.
	.globl	fp_frame
	.type	fp_frame, @function
fp_frame:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	subq	$16, %rsp
	call	leaf
	leave
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	fp_frame, .-fp_frame

# A 4 KiB frame: CFA offset 0x1010 needs 2-byte data words.
	.globl	big_frame
	.type	big_frame, @function
big_frame:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset %rbx, -16
	subq	$0x1000, %rsp
	.cfi_def_cfa_offset 0x1010
	call	leaf
	addq	$0x1000, %rsp
	.cfi_def_cfa_offset 16
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	big_frame, .-big_frame

# A 70000-byte frame: CFA offset 70008 (> 32767) needs 4-byte data words,
# and a saved FP at a 4-byte offset.
	.globl	huge_frame
	.type	huge_frame, @function
huge_frame:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	subq	$70000, %rsp
	.cfi_def_cfa_offset 70016
	call	leaf
	addq	$70000, %rsp
	.cfi_def_cfa_offset 16
	popq	%rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	huge_frame, .-huge_frame

# 300 bytes: FRE start addresses need 2 bytes (ADDR2); the push/pop rows sit
# on either side of offset 0x100.
	.globl	long_func
	.type	long_func, @function
long_func:
	.cfi_startproc
	pushq	%r12
	.cfi_def_cfa_offset 16
	.cfi_offset %r12, -16
	.fill	280, 1, 0x90
	pushq	%r13
	.cfi_def_cfa_offset 24
	.cfi_offset %r13, -24
	nop
	popq	%r13
	.cfi_def_cfa_offset 16
	popq	%r12
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	long_func, .-long_func
