/*
 * sigalt: a signal handler running on an alternate signal stack
 * (sigaltstack, SA_ONSTACK), blocked in pause(). The stack walk goes from
 * the alternate stack, through the kernel's signal frame, back to the
 * thread's own stack:
 *
 *   "altsig"  pause <- alt_handler_block <- alt_handler <- <signal handler
 *             called> <- alt_raise <- alt_thread <- start_thread <- clone3
 *
 * The alternate stack is its own anonymous mapping, away from the thread's
 * stack. The main thread sleeps in nanosleep and writes the progress file.
 */
#include "target.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#define ALT_SIZE (256 * 1024)

static volatile int handled;

TARGET_FN void alt_handler_block(void)
{
	handled = 1;
	for (;;)
		pause();
}

TARGET_FN void alt_handler(int sig)
{
	(void)sig;
	alt_handler_block();
}

TARGET_FN void alt_raise(void)
{
	raw_syscall3(SYS_tgkill, getpid(), raw_gettid(), SIGUSR1);
}

TARGET_FN void *alt_thread(void *arg)
{
	(void)arg;
	void *mem = mmap(NULL, ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	stack_t ss = {.ss_sp = mem, .ss_size = ALT_SIZE};
	if (sigaltstack(&ss, NULL) != 0) {
		perror("sigaltstack");
		exit(1);
	}
	alt_raise();
	return NULL;
}

int main(void)
{
	struct sigaction sa = {.sa_handler = alt_handler, .sa_flags = SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0) {
		perror("sigaction");
		return 1;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, alt_thread, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}
	pthread_setname_np(th, "altsig");
	while (!handled)
		progress_sleep_ms(1);
	announce_ready();
	for (unsigned long long n = 1;; n++) {
		progress_write(n);
		progress_sleep_ms(10);
	}
}
