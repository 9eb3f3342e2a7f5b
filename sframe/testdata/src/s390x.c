/* s390x fixture, C part. Compiled once with Debian bookworm's cross compiler
 *   s390x-linux-gnu-gcc (12.2) -O2 -S s390x.c
 * and committed as s390x-gcc.s, so regenerating the objects needs only the
 * sid binutils (see ../gen.sh). s390x-hand.s holds what GCC would not emit
 * on demand (_start, RA in an FPR, a signal trampoline). */
extern long ext(long *, long);

/* Leaf with register pressure: GCC parks the call-saved GPRs it clobbers,
 * among them r11 (the preferred FP), in call-clobbered FPRs
 * (ldgr/lgdr, ".cfi_register 11, 16" = FP in f0) instead of on the stack. */
long leaf_regs(long *p, long n)
{
	long a = p[0], b = p[1], c = p[2], d = p[3], e = p[4], f = p[5], g = p[6], h = p[7];
	for (long x = 0; x < n; x++) {
		a += b * x; b ^= c + x; c -= d; d += e * a; e ^= f; f += g; g -= h * b; h += a;
	}
	return a + b + c + d + e + f + g + h;
}

/* Ordinary non-leaf: stmg/lay, CFA sp+160+frame, RA saved at CFA-48. */
long caller(long n)
{
	long v[4] = { n, n + 1, n + 2, n + 3 };
	return ext(v, n) + 1;
}

/* 4 KiB of locals: CFA sp+4256, 2-byte data words. */
long big_frame(long n)
{
	long v[512];
	v[n & 511] = n;
	return ext(v, n);
}

/* Variable-length array: GCC sets up r11 as frame pointer, CFA = fp+off. */
long with_fp(long n)
{
	long v[n];
	v[0] = n;
	return ext(v, n);
}
