# Tiny shared object for the PLT fixture: two functions called through .plt.
	.text
	.globl	lib_a
	.type	lib_a, @function
lib_a:
	.cfi_startproc
	movl	$1, %eax
	ret
	.cfi_endproc
	.size	lib_a, .-lib_a
	.globl	lib_b
	.type	lib_b, @function
lib_b:
	.cfi_startproc
	movl	$2, %eax
	ret
	.cfi_endproc
	.size	lib_b, .-lib_b
