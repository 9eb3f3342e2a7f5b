# Dynamic executable calling two functions of a shared object through the
# lazy PLT, so ld emits the PLT0 (PCINC) and PLTn (PCMASK) FDEs.
	.text
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	call	lib_a@PLT
	call	lib_b@PLT
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	hlt
	.cfi_endproc
	.size	_start, .-_start
