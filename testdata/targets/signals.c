/*
 * signals: threads parked inside signal handlers, so an unwinder must cross
 * the kernel's signal frame (glibc's __restore_rt trampoline) to reach the
 * interrupted code. Each thread names itself after its case:
 *
 *   comm        innermost frame first
 *   sigspin     alrm_spin, alrm_handler, <signal frame>, spin_work,
 *               sigspin_thread  (SIGALRM from a per-thread timer interrupts
 *                                a loop in this binary's own code; the
 *                                handler spins forever)
 *   sigsyscall  pause (libc), usr1_handler, <signal frame>, read_block,
 *               sigsyscall_thread  (SIGUSR1 interrupts a raw read(2) on a
 *                                   pipe; the handler blocks in pause())
 *   signested   inner_spin, inner_handler, <signal frame>, outer_handler,
 *               <signal frame>, nested_work, signested_thread
 *               (SIGUSR2's handler sends itself SIGRTMIN, whose handler
 *                spins forever: two signal frames on one stack)
 *   main        the main thread, in libc's clock_nanosleep
 *
 * Below each thread function: start_thread and clone3 in libc.
 * Prints "ready" once every handler is in its final place, then publishes a
 * progress counter every 10 ms (see target.h).
 */
#include "target.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

enum slot { SLOT_SPIN, SLOT_SYSCALL, SLOT_NESTED, NSLOTS };

struct counter {
	volatile unsigned long n;
} __attribute__((aligned(64)));

static struct counter spins[NSLOTS];  /* before the signal */
static struct counter hspins[NSLOTS]; /* in the final handler */
static volatile int tids[NSLOTS];
static volatile int in_pause;
static int pipefd[2];
volatile int sink;

/* ---- sigspin: SIGALRM interrupts this binary's own loop ---- */

TARGET_FN void alrm_spin(void)
{
	for (;;)
		spin_step(&hspins[SLOT_SPIN].n, 0);
}

TARGET_FN void alrm_handler(int sig)
{
	sink = sig;
	alrm_spin();
	sink++;
}

TARGET_FN void spin_work(void)
{
	for (;;)
		spin_step(&spins[SLOT_SPIN].n, 0);
}

static void *sigspin_thread(void *arg)
{
	(void)arg;
	tids[SLOT_SPIN] = raw_gettid();
	struct sigevent sev = {0};
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev._sigev_un._tid = raw_gettid();
	timer_t timer;
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0)
		die("timer_create", errno);
	struct itimerspec its = {{0, 0}, {0, 20000000}}; /* once, in 20 ms */
	if (timer_settime(timer, 0, &its, NULL) != 0)
		die("timer_settime", errno);
	spin_work();
	sink++;
	return NULL;
}

/* ---- sigsyscall: SIGUSR1 interrupts a raw read(2); the handler pauses ---- */

TARGET_FN void usr1_handler(int sig)
{
	sink = sig;
	in_pause = 1;
	pause();
	sink++;
}

TARGET_FN void read_block(void)
{
	char c;
	for (;;)
		raw_syscall3(SYS_read, pipefd[0], (long)&c, 1);
}

static void *sigsyscall_thread(void *arg)
{
	(void)arg;
	tids[SLOT_SYSCALL] = raw_gettid();
	read_block();
	sink++;
	return NULL;
}

/* ---- signested: a signal frame inside a signal handler ---- */

TARGET_FN void inner_spin(void)
{
	for (;;)
		spin_step(&hspins[SLOT_NESTED].n, 0);
}

TARGET_FN void inner_handler(int sig)
{
	sink = sig;
	inner_spin();
	sink++;
}

TARGET_FN void outer_handler(int sig)
{
	sink = sig;
	raw_syscall3(SYS_tgkill, getpid(), raw_gettid(), SIGRTMIN);
	sink++;
}

TARGET_FN void nested_work(void)
{
	for (;;)
		spin_step(&spins[SLOT_NESTED].n, 0);
}

static void *signested_thread(void *arg)
{
	(void)arg;
	tids[SLOT_NESTED] = raw_gettid();
	nested_work();
	sink++;
	return NULL;
}

/* ---- main ---- */

static void handle(int sig, void (*fn)(int))
{
	struct sigaction sa = {0};
	sa.sa_handler = fn;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		die("sigaction", errno);
}


static void wait_for(int (*cond)(void), const char *what)
{
	for (int tries = 0; !cond(); tries++) {
		if (tries > 10000) /* 10 s */
			die(what, ETIMEDOUT);
		progress_sleep_ms(1);
	}
}

static int started(void)
{
	return spins[SLOT_SPIN].n && spins[SLOT_NESTED].n && tids[SLOT_SYSCALL] &&
	       in_syscall(tids[SLOT_SYSCALL], SYS_read);
}

static int settled(void)
{
	return hspins[SLOT_SPIN].n && hspins[SLOT_NESTED].n && in_pause &&
	       in_syscall(tids[SLOT_SYSCALL], SYS_pause);
}

int main(void)
{
	if (pipe(pipefd) != 0)
		die("pipe", errno);
	handle(SIGALRM, alrm_handler);
	handle(SIGUSR1, usr1_handler);
	handle(SIGUSR2, outer_handler);
	handle(SIGRTMIN, inner_handler);

	static const struct {
		const char *comm;
		void *(*fn)(void *);
	} shapes[NSLOTS] = {
		[SLOT_SPIN] = {"sigspin", sigspin_thread},
		[SLOT_SYSCALL] = {"sigsyscall", sigsyscall_thread},
		[SLOT_NESTED] = {"signested", signested_thread},
	};
	pthread_t th[NSLOTS];
	for (int s = 0; s < NSLOTS; s++) {
		int err = pthread_create(&th[s], NULL, shapes[s].fn, NULL);
		if (err != 0)
			die("pthread_create", err);
		pthread_setname_np(th[s], shapes[s].comm);
	}
	wait_for(started, "threads did not start");
	pthread_kill(th[SLOT_SYSCALL], SIGUSR1);
	pthread_kill(th[SLOT_NESTED], SIGUSR2);
	wait_for(settled, "handlers did not settle");
	ready_then_tick();
}
