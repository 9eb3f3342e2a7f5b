/*
 * target.h: shared helpers for the stacktop test targets.
 *
 * Every target reports liveness the same way: when the environment variable
 * STACKTOP_PROGRESS names a file, the main thread rewrites that file with a
 * monotonically increasing decimal counter every 10 ms. The file is written
 * to PATH.tmp and renamed over PATH, so a reader never sees a torn value.
 * A test reads it twice to prove the process kept running (for instance
 * after it was stopped and resumed by a sampler).
 *
 * "ready\n" is printed on stdout (and flushed) once every thread a target
 * promises is in place; tests wait for that line before sampling.
 */
#ifndef STACKTOP_TARGETS_TARGET_H
#define STACKTOP_TARGETS_TARGET_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

/* Functions whose names must survive into the binary exactly as written:
 * noipa forbids inlining, cloning (.constprop/.isra suffixes) and
 * interprocedural assumptions, so each call site stays a real call. */
#define TARGET_FN __attribute__((noipa))

static inline void progress_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/* progress_write publishes value via STACKTOP_PROGRESS (no-op if unset). */
static inline void progress_write(unsigned long long value)
{
	static const char *path;
	static char tmp[4096];
	static int init;
	if (!init) {
		init = 1;
		path = getenv("STACKTOP_PROGRESS");
		if (path != NULL && snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
			path = NULL;
	}
	if (path == NULL)
		return;
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%llu\n", value);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	ssize_t w = write(fd, buf, (size_t)n);
	close(fd);
	if (w == n)
		rename(tmp, path);
}

static inline void announce_ready(void)
{
	fputs("ready\n", stdout);
	fflush(stdout);
}

static inline int raw_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

static inline __attribute__((always_inline)) long
raw_syscall3(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

/* spin_step counts one iteration in *n and, unless busy, naps 1 ms every
 * 16384 iterations with a raw nanosleep, so a spinning thread costs a few
 * percent of a CPU. Always inlined: the pc stays in the caller, and no libc
 * frame is ever on top of a spinning thread. */
static inline __attribute__((always_inline)) void
spin_step(volatile unsigned long *n, int busy)
{
	static const struct timespec nap = {0, 1000000};
	unsigned long v = *n + 1;
	*n = v;
	if (!busy && (v & 0x3fff) == 0)
		raw_syscall3(SYS_nanosleep, (long)&nap, 0, 0);
}

/* die reports a setup failure; targets never fail after "ready". */
static inline void die(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, strerror(err));
	exit(2);
}

/* in_syscall reports whether thread tid is blocked in system call nr, as
 * /proc/self/task/TID/syscall shows it: how a target waits until its
 * threads have reached the calls the tests expect them in. */
static inline int in_syscall(int tid, long nr)
{
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *end;
	long got = strtol(buf, &end, 10);
	return end != buf && got == nr;
}

/* ready_then_tick publishes progress 0, prints "ready", then bumps the
 * progress counter every 10 ms forever: the main thread's life once the
 * other threads are in place. Always inlined, so main stays the frame
 * below the sleep. */
static inline __attribute__((always_inline, noreturn)) void ready_then_tick(void)
{
	progress_write(0); /* readable as soon as "ready" is seen */
	announce_ready();
	for (unsigned long long n = 1;; n++) {
		progress_write(n);
		progress_sleep_ms(10);
	}
}

#endif
