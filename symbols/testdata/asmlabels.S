/* asmlabels.S: hand-written assembly labels, linked into cprog-asm, to
 * cover STT_NOTYPE symbols: a global size-0 label, a local sized label,
 * and a local size-0 label that must not be kept. */
	.text
	.globl	asm_global_nosize
asm_global_nosize:
	nop
	nop
	ret

	.type	asm_local_sized, @notype
asm_local_sized:
	nop
	nop
	nop
asm_local_inner:
	ret
	.size	asm_local_sized, . - asm_local_sized

	.globl	asm_after
	.type	asm_after, @function
asm_after:
	ret
	.size	asm_after, . - asm_after
	.section .note.GNU-stack,"",@progbits
