/*
 * chains: threads parked forever in deep call chains of this binary's own
 * code, one shape per thread, so an unwinder's output can be checked frame by
 * frame against gdb. Each thread names itself (pthread_setname_np, visible in
 * /proc/PID/task/TID/comm) after the shape it exercises:
 *
 *   comm        innermost frame first (then start_thread, clone3 in libc)
 *   recurse     recurse_leaf, recurse_step x8, recurse_thread
 *   tailcall    tail_b, tail_entry, tailcall_thread     (tail_a tail-calls
 *                                                          tail_b: no frame)
 *   bigframe    big_leaf, big_mid, big_outer, bigframe_thread
 *                (frames of ~5 KiB, ~300 B and ~70 KiB: SFrame offsets of
 *                 2 and 4 bytes)
 *   aligned     aligned_leaf, aligned_frame, aligned_thread
 *                (aligned_frame realigns rsp with and $-64 behind rbp)
 *   drap        drap_leaf, drap_frame, drap_thread
 *                (aligned local + VLA: GCC uses a DRAP register, r10; the
 *                 CFA is a DWARF expression, a flexible FDE in SFrame V3)
 *   sysread     sysread_block, sysread_outer, sysread_thread
 *                (blocked in read(2) on a pipe, issued by inline asm)
 *   syspause    syspause_block, syspause_thread   (pause(2), inline asm)
 *   asmprolog   asm_prologue_spin, asm_caller, asmprolog_thread
 *                (hand-written asm caught between push %rbp and
 *                 mov %rsp,%rbp: chains_asm.s)
 *   asmentry    asm_entry_spin, asm_entry_caller, asmentry_thread
 *                (caught at the first instructions: CFA = rsp + 8)
 *   main        the main thread, in libc's clock_nanosleep
 *
 * Spinning threads nap 1 ms (a raw nanosleep issued from the innermost
 * function itself, so no libc frame is ever on top) every 16384 iterations to
 * keep the machine usable; with the argument "busy" they never nap.
 *
 * Prints "ready" once every thread is in its innermost function (spinners
 * have counted at least once, blockers are seen inside their system call in
 * /proc/self/task/TID/syscall), then publishes a progress counter every 10 ms
 * (see target.h).
 */
#include "target.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

enum slot {
	SLOT_RECURSE,
	SLOT_TAILCALL,
	SLOT_BIGFRAME,
	SLOT_ALIGNED,
	SLOT_DRAP,
	SLOT_SYSREAD,
	SLOT_SYSPAUSE,
	SLOT_ASMPROLOG,
	SLOT_ASMENTRY,
	NSLOTS
};

/* Per-thread spin counter, one cache line each so spinners do not contend. */
struct counter {
	volatile unsigned long n;
} __attribute__((aligned(64)));

static struct counter spins[NSLOTS];
static volatile int tids[NSLOTS];
static int busy;
static int pipefd[2];
volatile int sink; /* stores after calls keep them from being tail calls */

/* In chains_asm.s. */
void asm_prologue_spin(volatile unsigned long *counter, int busy);
void asm_entry_spin(volatile unsigned long *counter, int busy);

/* ---- recurse: recursion 8 deep ---- */

TARGET_FN void recurse_leaf(void)
{
	for (;;)
		spin_step(&spins[SLOT_RECURSE].n, busy);
}

TARGET_FN void recurse_step(int depth)
{
	if (depth == 0)
		recurse_leaf();
	else
		recurse_step(depth - 1);
	sink += depth;
}

static void *recurse_thread(void *arg)
{
	(void)arg;
	recurse_step(7); /* 8 recurse_step frames: depth 7..0 */
	sink++;
	return NULL;
}

/* ---- tailcall: tail_a's last call is a jmp ---- */

TARGET_FN void tail_b(int x)
{
	sink = x;
	for (;;)
		spin_step(&spins[SLOT_TAILCALL].n, busy);
}

TARGET_FN void tail_a(int x)
{
	sink = x + 1;
	tail_b(x + 2); /* sibling call at -O2: tail_a leaves no frame */
}

TARGET_FN void tail_entry(int x)
{
	tail_a(x);
	sink++;
}

static void *tailcall_thread(void *arg)
{
	(void)arg;
	tail_entry(1);
	sink++;
	return NULL;
}

/* ---- bigframe: 1-, 2- and 4-byte SFrame offsets ---- */

TARGET_FN void big_leaf(int x)
{
	volatile char buf[5000];
	buf[0] = (char)x;
	buf[sizeof buf - 1] = (char)x;
	for (;;) {
		spin_step(&spins[SLOT_BIGFRAME].n, busy);
		buf[spins[SLOT_BIGFRAME].n % sizeof buf]++;
	}
}

TARGET_FN void big_mid(int x)
{
	volatile char buf[300];
	buf[0] = (char)x;
	buf[sizeof buf - 1] = (char)x;
	big_leaf(buf[0] + buf[sizeof buf - 1]);
	sink += buf[1];
}

TARGET_FN void big_outer(int x)
{
	volatile char buf[70000];
	buf[0] = (char)x;
	buf[sizeof buf - 1] = (char)x;
	big_mid(buf[0] + buf[sizeof buf - 1]);
	sink += buf[1];
}

static void *bigframe_thread(void *arg)
{
	(void)arg;
	big_outer(3);
	sink++;
	return NULL;
}

/* ---- aligned: stack realignment behind a frame pointer ---- */

TARGET_FN void aligned_leaf(volatile char *p)
{
	for (;;) {
		spin_step(&spins[SLOT_ALIGNED].n, busy);
		p[1]++;
	}
}

TARGET_FN int aligned_frame(int x)
{
	volatile char buf[64] __attribute__((aligned(64)));
	buf[0] = (char)x;
	aligned_leaf(buf);
	return buf[1];
}

static void *aligned_thread(void *arg)
{
	(void)arg;
	sink += aligned_frame(4);
	return NULL;
}

/* ---- drap: realignment plus a variable-length array ---- */

TARGET_FN void drap_leaf(volatile char *a, volatile char *b)
{
	for (;;) {
		spin_step(&spins[SLOT_DRAP].n, busy);
		a[1]++;
		b[0]++;
	}
}

TARGET_FN int drap_frame(int n)
{
	volatile char buf[64] __attribute__((aligned(64)));
	volatile char vla[n];
	buf[0] = (char)n;
	vla[0] = (char)n;
	drap_leaf(buf, vla);
	return buf[1] + vla[0];
}

static void *drap_thread(void *arg)
{
	(void)arg;
	sink += drap_frame(40);
	return NULL;
}

/* ---- sysread / syspause: blocked in a raw system call ---- */

TARGET_FN void sysread_block(int fd)
{
	char c;
	for (;;) /* restarted after a stop/continue; nobody ever writes */
		if (raw_syscall3(SYS_read, fd, (long)&c, 1) == 1)
			sink = c;
}

TARGET_FN void sysread_outer(int fd)
{
	sysread_block(fd);
	sink++;
}

static void *sysread_thread(void *arg)
{
	(void)arg;
	tids[SLOT_SYSREAD] = raw_gettid();
	sysread_outer(pipefd[0]);
	sink++;
	return NULL;
}

TARGET_FN void syspause_block(void)
{
	for (;;)
		raw_syscall3(SYS_pause, 0, 0, 0);
}

static void *syspause_thread(void *arg)
{
	(void)arg;
	tids[SLOT_SYSPAUSE] = raw_gettid();
	syspause_block();
	sink++;
	return NULL;
}

/* ---- asmprolog / asmentry: hand-written assembly ---- */

TARGET_FN void asm_caller(void)
{
	asm_prologue_spin(&spins[SLOT_ASMPROLOG].n, busy);
	sink++;
}

static void *asmprolog_thread(void *arg)
{
	(void)arg;
	asm_caller();
	sink++;
	return NULL;
}

TARGET_FN void asm_entry_caller(void)
{
	asm_entry_spin(&spins[SLOT_ASMENTRY].n, busy);
	sink++;
}

static void *asmentry_thread(void *arg)
{
	(void)arg;
	asm_entry_caller();
	sink++;
	return NULL;
}

/* ---- main ---- */

struct shape {
	const char *comm;
	void *(*fn)(void *);
	long blocked_in; /* syscall number the thread parks in, or -1: spinner */
};

static const struct shape shapes[NSLOTS] = {
	[SLOT_RECURSE] = {"recurse", recurse_thread, -1},
	[SLOT_TAILCALL] = {"tailcall", tailcall_thread, -1},
	[SLOT_BIGFRAME] = {"bigframe", bigframe_thread, -1},
	[SLOT_ALIGNED] = {"aligned", aligned_thread, -1},
	[SLOT_DRAP] = {"drap", drap_thread, -1},
	[SLOT_SYSREAD] = {"sysread", sysread_thread, SYS_read},
	[SLOT_SYSPAUSE] = {"syspause", syspause_thread, SYS_pause},
	[SLOT_ASMPROLOG] = {"asmprolog", asmprolog_thread, -1},
	[SLOT_ASMENTRY] = {"asmentry", asmentry_thread, -1},
};


static int in_place(int s)
{
	if (shapes[s].blocked_in < 0)
		return spins[s].n != 0;
	return tids[s] != 0 && in_syscall(tids[s], shapes[s].blocked_in);
}

int main(int argc, char **argv)
{
	busy = argc > 1 && strcmp(argv[1], "busy") == 0;
	if (pipe(pipefd) != 0)
		die("pipe", errno);
	signal(SIGPIPE, SIG_IGN);

	for (int s = 0; s < NSLOTS; s++) {
		pthread_t th;
		int err = pthread_create(&th, NULL, shapes[s].fn, NULL);
		if (err != 0)
			die("pthread_create", err);
		pthread_setname_np(th, shapes[s].comm);
	}
	for (int tries = 0;; tries++) {
		int all = 1;
		for (int s = 0; s < NSLOTS && all; s++)
			all = in_place(s);
		if (all)
			break;
		if (tries > 10000) /* 10 s */
			die("threads did not settle", ETIMEDOUT);
		progress_sleep_ms(1);
	}
	ready_then_tick();
}
