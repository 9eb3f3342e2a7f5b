/*
 * perfmap: JIT-style code. Copies a small function into anonymous
 * executable memory and lists it in /tmp/perf-PID.map, as node, JVM perf
 * map agents and LuaJIT do, then runs it on a thread:
 *
 *   "jitone"  jit_spin_one (anonymous memory) <- jit_thread <-
 *             start_thread <- clone3
 *
 * On SIGUSR1 the main thread generates a second function, appends it to
 * the map and runs it on a new thread ("jittwo", jit_spin_two): a reader
 * must notice that the file grew. The generated code keeps the frame
 * pointer convention (push rbp; mov rsp,rbp) and spins on pause.
 *
 * The map file is removed at SIGTERM/SIGINT; after a SIGKILL the test that
 * started the program removes it.
 */
#include "target.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

/* push %rbp; mov %rsp,%rbp; 1: pause; jmp 1b */
static const unsigned char spin_code[] = {0x55, 0x48, 0x89, 0xe5, 0xf3, 0x90, 0xeb, 0xfc};

static char map_path[64];
static volatile sig_atomic_t want_second, quit;

static void on_usr1(int sig) { (void)sig; want_second = 1; }
static void on_term(int sig) { (void)sig; quit = 1; }

/* jit generates a copy of spin_code at a page of its own and appends it
 * to the perf map under name. */
static void (*jit(const char *name))(void)
{
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memcpy(p, spin_code, sizeof spin_code);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0) {
		perror("mprotect");
		exit(1);
	}
	FILE *f = fopen(map_path, "a");
	if (f == NULL) {
		perror(map_path);
		exit(1);
	}
	fprintf(f, "%lx %zx %s\n", (unsigned long)p, sizeof spin_code, name);
	fclose(f);
	return (void (*)(void))p;
}

TARGET_FN void *jit_thread(void *fn)
{
	((void (*)(void))fn)();
	return NULL;
}

static void start(const char *thread, void (*fn)(void))
{
	pthread_t th;
	if (pthread_create(&th, NULL, jit_thread, (void *)fn) != 0) {
		perror("pthread_create");
		exit(1);
	}
	pthread_setname_np(th, thread);
}

int main(void)
{
	snprintf(map_path, sizeof map_path, "/tmp/perf-%d.map", getpid());
	unlink(map_path);
	signal(SIGUSR1, on_usr1);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	start("jitone", jit("jit_spin_one"));
	announce_ready();
	for (unsigned long long n = 1; !quit; n++) {
		if (want_second == 1) {
			want_second = 2;
			start("jittwo", jit("jit_spin_two"));
		}
		progress_write(n);
		progress_sleep_ms(10);
	}
	unlink(map_path);
	return 0;
}
