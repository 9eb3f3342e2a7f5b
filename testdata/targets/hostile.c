/*
 * hostile: a target that attacks its sampler with what it controls, one
 * thread a case (its comm names it). The hostile tests build it.
 *
 *   fp-cycle    a frame record whose saved frame pointer points at itself
 *   fp-unmapped the frame pointer in unmapped memory
 *   fp-device   the frame pointer in a mapping of /dev/zero
 *   sp-huge     the stack pointer far outside any mapping
 *   "\e[2J..."  a thread named with terminal escape sequences
 *   jit         code in anonymous memory named in /tmp/perf-PID.map with
 *               escape sequences (or, with argument "fifo", a FIFO as the
 *               perf map; "link", a symlink to a root-only file)
 *   main        maps a 4 GiB sparse file executable, then waits
 *
 * Each case thread spins in code without unwind tables (assembly without
 * CFI), so the unwinder must use the frame pointer the case corrupts.
 * Prints "ready" once every thread runs. x86-64 only.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* spin_with_fp(fp): rbp = fp, then spin for ever without touching the
 * stack. spin_with_sp(sp): rsp = sp, the same. No CFI: the unwinder has
 * only the frame pointer (or nothing) to go on. */
__asm__(
	".text\n"
	".globl spin_with_fp\n"
	"spin_with_fp:\n"
	"	mov %rdi, %rbp\n"
	"1:	jmp 1b\n"
	".globl spin_with_sp\n"
	"spin_with_sp:\n"
	"	mov %rdi, %rsp\n"
	"2:	jmp 2b\n");
void spin_with_fp(void *fp);
void spin_with_sp(unsigned long sp);

static volatile int started;

static void named(const char *name) {
	prctl(PR_SET_NAME, name);
	__sync_fetch_and_add(&started, 1);
}

static void *fp_cycle(void *a) {
	/* On this thread's stack, above the spinning frame, as a real frame
	 * record is: its saved rbp points at itself. */
	void *volatile record[2];
	record[0] = (void *)record;
	record[1] = (void *)spin_with_fp; /* a return address in code */
	named("fp-cycle");
	spin_with_fp((void *)record);
	return a;
}

static void *fp_unmapped(void *a) {
	named("fp-unmapped");
	spin_with_fp((void *)0x10);
	return a;
}

static void *fp_device(void *a) {
	int fd = open("/dev/zero", O_RDWR);
	void *m = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	named("fp-device");
	spin_with_fp((char *)m + (1 << 19));
	return a;
}

static void *sp_huge(void *a) {
	named("sp-huge");
	spin_with_sp(0x7ff0deadb000UL);
	return a;
}

static volatile unsigned long escape_spins;

static void *escape_name(void *a) {
	named("\x1b[2J\x1b]0;pw\a");
	for (;;) /* running, so an on-CPU profile has it too */
		escape_spins++;
	return a;
}

static const unsigned char spin_code[] = {0xeb, 0xfe}; /* 1: jmp 1b */

static void *jit(void *a) {
	void *code = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(code, spin_code, sizeof spin_code);
	named("jit");
	((void (*)(void))code)();
	return a;
}

static void perf_map(const char *mode, void *code_hint) {
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	unlink(path);
	if (strcmp(mode, "fifo") == 0) {
		mkfifo(path, 0644);
	} else if (strcmp(mode, "link") == 0) {
		symlink("/etc/shadow", path);
	} else {
		FILE *f = fopen(path, "w");
		/* Every anonymous executable page of the process, named with an
		 * escape sequence: the sampler must not print it raw. */
		fprintf(f, "%lx 1000 \x1b[31mjit_red\x1b[0m\n", (unsigned long)code_hint & ~0xfffUL);
		fclose(f);
	}
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "names";
	void *(*cases[])(void *) = {fp_cycle, fp_unmapped, fp_device, sp_huge, escape_name, jit};
	int n = sizeof cases / sizeof cases[0];
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	for (int i = 0; i < n; i++) {
		pthread_t t;
		pthread_create(&t, &attr, cases[i], 0);
	}
	char sparse[] = "/tmp/hostile-sparse-XXXXXX";
	int fd = mkstemp(sparse);
	ftruncate(fd, 4UL << 30);
	void *big = mmap(0, 4UL << 30, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	unlink(sparse);
	while (started < n)
		usleep(1000);
	/* The JIT page: the lowest anonymous executable mapping; its address
	 * is in /proc/self/maps, which is simplest to read back here. */
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long jit_at = 0;
	while (fgets(line, sizeof line, maps)) {
		unsigned long lo, hi;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && perms[2] == 'x' && hi - lo == 4096 &&
		    strchr(line, '/') == 0 && strstr(line, "[") == 0)
			jit_at = lo;
	}
	fclose(maps);
	perf_map(mode, (void *)jit_at);
	printf("ready\n");
	(void)big;
	fflush(stdout);
	for (;;)
		pause();
}
