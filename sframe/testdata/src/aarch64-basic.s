// aarch64 functions every SFrame version can describe (V1, V2, V3); also
// assembled big-endian (as -EB, ABI id 1) by sid's binutils. See ../gen.sh.
	.text

	.globl	_start
	.type	_start, %function
_start:
	.cfi_startproc
	mov	x29, #0
	bl	frame_record
	bl	pac_a
	bl	pac_b
	bl	big_frame
	bl	huge_frame
	bl	long_func
	mov	x8, #93
	svc	#0
	.cfi_endproc
	.size	_start, .-_start

// Leaf: CFA sp+0, RA still in x30 (u), FP unchanged (u).
	.globl	leaf
	.type	leaf, %function
leaf:
	.cfi_startproc
	add	w0, w0, #1
	ret
	.cfi_endproc
	.size	leaf, .-leaf

// Frame record: sp+16 FP c-16 RA c-8, then fp+16 once x29 is set.
	.globl	frame_record
	.type	frame_record, %function
frame_record:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	.cfi_def_cfa_register 29
	bl	leaf
	.cfi_def_cfa 31, 16
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	frame_record, .-frame_record

// Pointer authentication, A key (GCC -mbranch-protection=pac-ret).
	.globl	pac_a
	.type	pac_a, %function
pac_a:
	.cfi_startproc
	paciasp
	.cfi_negate_ra_state
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov	x29, sp
	bl	leaf
	ldp	x29, x30, [sp], #32
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	autiasp
	.cfi_negate_ra_state
	ret
	.cfi_endproc
	.size	pac_a, .-pac_a

// Pointer authentication, B key (GCC -mbranch-protection=pac-ret+b-key).
	.globl	pac_b
	.type	pac_b, %function
pac_b:
	.cfi_startproc
	.cfi_b_key_frame
	pacibsp
	.cfi_negate_ra_state
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	leaf
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	autibsp
	.cfi_negate_ra_state
	ret
	.cfi_endproc
	.size	pac_b, .-pac_b

// A 4 KiB frame: CFA sp+4112 needs 2-byte data words.
	.globl	big_frame
	.type	big_frame, %function
big_frame:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	sub	sp, sp, #4096
	.cfi_def_cfa_offset 4112
	bl	leaf
	add	sp, sp, #4096
	.cfi_def_cfa_offset 16
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	big_frame, .-big_frame

// A 70000-byte frame: CFA sp+70016 needs 4-byte data words.
	.globl	huge_frame
	.type	huge_frame, %function
huge_frame:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	sub	sp, sp, #17, lsl #12
	sub	sp, sp, #368
	.cfi_def_cfa_offset 70016
	bl	leaf
	add	sp, sp, #17, lsl #12
	add	sp, sp, #368
	.cfi_def_cfa_offset 16
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	huge_frame, .-huge_frame

// 300+ bytes: ADDR2 FRE start addresses.
	.globl	long_func
	.type	long_func, %function
long_func:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	.fill	75, 4, 0xd503201f
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	long_func, .-long_func
