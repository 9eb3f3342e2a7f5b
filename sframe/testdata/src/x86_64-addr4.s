# x86-64: a function of more than 64 KiB, so its FREs need 4-byte start
# addresses (ADDR4). The body is .fill'ed nops.
	.text
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	call	giant
	hlt
	.cfi_endproc
	.size	_start, .-_start

	.globl	giant
	.type	giant, @function
giant:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	.fill	0x10010, 1, 0x90
	popq	%rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	giant, .-giant
