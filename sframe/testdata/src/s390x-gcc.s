	.file	"s390x.c"
	.machinemode zarch
	.machine "z196"
.text
	.align	8
.globl leaf_regs
	.type	leaf_regs, @function
leaf_regs:
.LFB0:
	.cfi_startproc
	ldgr	%f6,%r8
	.cfi_register 8, 19
	ldgr	%f4,%r9
	.cfi_register 9, 18
	ldgr	%f2,%r10
	.cfi_register 10, 17
	ldgr	%f0,%r11
	.cfi_register 11, 16
	lg	%r1,0(%r2)
	lg	%r4,8(%r2)
	lg	%r8,16(%r2)
	lg	%r9,24(%r2)
	lg	%r10,32(%r2)
	lg	%r11,40(%r2)
	lg	%r0,48(%r2)
	ldgr	%f3,%r6
	.cfi_register 6, 21
	ldgr	%f1,%r7
	.cfi_register 7, 20
	lg	%r2,56(%r2)
	ltgr	%r3,%r3
	jle	.L2
	lghi	%r5,0
.L3:
	lgr	%r7,%r4
	msgr	%r7,%r5
	agrk	%r6,%r8,%r5
	xgr	%r4,%r6
	lgr	%r6,%r4
	msgr	%r6,%r2
	sgr	%r8,%r9
	aghi	%r5,1
	agr	%r1,%r7
	lgr	%r7,%r1
	msgr	%r7,%r10
	agr	%r2,%r1
	xgr	%r10,%r11
	agr	%r11,%r0
	sgr	%r0,%r6
	agr	%r9,%r7
	brctg	%r3,.L3
.L2:
	agr	%r1,%r4
	lgdr	%r7,%f1
	.cfi_restore 7
	agr	%r1,%r8
	lgdr	%r6,%f3
	.cfi_restore 6
	agr	%r1,%r9
	lgdr	%r8,%f6
	.cfi_restore 8
	agr	%r1,%r10
	lgdr	%r9,%f4
	.cfi_restore 9
	agr	%r1,%r11
	lgdr	%r10,%f2
	.cfi_restore 10
	agr	%r1,%r0
	lgdr	%r11,%f0
	.cfi_restore 11
	agr	%r2,%r1
	br	%r14
	.cfi_endproc
.LFE0:
	.size	leaf_regs, .-leaf_regs
	.align	8
.globl caller
	.type	caller, @function
caller:
.LFB1:
	.cfi_startproc
	stmg	%r14,%r15,112(%r15)
	lgr	%r3,%r2
	aghik	%r1,%r3,1
	.cfi_offset 14, -48
	.cfi_offset 15, -40
	lay	%r15,-192(%r15)
	.cfi_def_cfa_offset 352
	stg	%r1,168(%r15)
	aghik	%r1,%r3,2
	stg	%r1,176(%r15)
	stg	%r3,160(%r15)
	aghik	%r1,%r3,3
	stg	%r1,184(%r15)
	la	%r2,160(%r15)
	brasl	%r14,ext@PLT
	lmg	%r14,%r15,304(%r15)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_def_cfa_offset 160
	aghi	%r2,1
	br	%r14
	.cfi_endproc
.LFE1:
	.size	caller, .-caller
	.align	8
.globl big_frame
	.type	big_frame, @function
big_frame:
.LFB2:
	.cfi_startproc
	stmg	%r14,%r15,112(%r15)
	lgr	%r3,%r2
	risbg	%r1,%r3,52,128+60,3
	.cfi_offset 14, -48
	.cfi_offset 15, -40
	lay	%r15,-4256(%r15)
	.cfi_def_cfa_offset 4416
	stg	%r3,160(%r1,%r15)
	la	%r2,160(%r15)
	brasl	%r14,ext@PLT
	lmg	%r14,%r15,4368(%r15)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_def_cfa_offset 160
	br	%r14
	.cfi_endproc
.LFE2:
	.size	big_frame, .-big_frame
	.align	8
.globl with_fp
	.type	with_fp, @function
with_fp:
.LFB3:
	.cfi_startproc
	sllg	%r1,%r2,3
	lgr	%r3,%r2
	stmg	%r11,%r15,88(%r15)
	.cfi_offset 11, -72
	.cfi_offset 12, -64
	.cfi_offset 13, -56
	.cfi_offset 14, -48
	.cfi_offset 15, -40
	lay	%r15,-160(%r15)
	.cfi_def_cfa_offset 320
	lgr	%r11,%r15
	.cfi_def_cfa_register 11
	sgr	%r15,%r1
	stg	%r3,160(%r15)
	la	%r2,160(%r15)
	brasl	%r14,ext@PLT
	lmg	%r11,%r15,248(%r11)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_restore 13
	.cfi_restore 12
	.cfi_restore 11
	.cfi_def_cfa 15, 160
	br	%r14
	.cfi_endproc
.LFE3:
	.size	with_fp, .-with_fp
	.ident	"GCC: (Debian 12.2.0-14) 12.2.0"
	.section	.note.GNU-stack,"",@progbits
