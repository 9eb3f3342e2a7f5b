// Test targets for package ptrace. Modes:
//   spin N       N threads in all (main included) spinning; prints "ready"
//   signals      counts SIGUSR1 (acks each with a byte 'u' on stdout) and
//                SIGRTMIN+6; on SIGTERM prints "usr1=N rt=M" and exits
//   churn        creates and joins threads in a loop; prints "ready"
//   exit MS      two spinning threads; exits with status 7 after MS ms
//   vfork MS     a spinning thread, and one that vforks a child which
//                prints "ready", sleeps MS ms and exits: meanwhile the
//                vfork parent sleeps uninterruptibly (state D); then it
//                prints "back" and the main thread prints "done" once
//                it was joined
//   many N S     N threads besides main: the first S spin, the others
//                block, in turn, in libc's nanosleep, in a raw futex wait
//                and in a raw read(2) on a pipe; prints "ready" once all
//                are in place
//   grow N MS    N blocking threads as many makes them; prints "ready",
//                then the main thread adds one more every MS ms (500 at
//                most)
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t usr1, rt, term;
static volatile unsigned long sink;

// A process-directed signal may run its handler on either thread, and two
// handlers can run at once on two CPUs: the counts are atomic, or a count
// loses an increment that was never a lost signal.
static void on_usr1(int s) { (void)s; __atomic_fetch_add(&usr1, 1, __ATOMIC_RELAXED); write(1, "u", 1); }
static void on_rt(int s) { (void)s; __atomic_fetch_add(&rt, 1, __ATOMIC_RELAXED); }
static void on_term(int s) { (void)s; term = 1; }

__attribute__((noinline)) static void spin_leaf(void) {
  for (int i = 0; i < 1000; i++) sink += i;
}
static void *spinner(void *a) { (void)a; for (;;) spin_leaf(); return 0; }
static void *short_worker(void *a) {
  for (int i = 0; i < 20000; i++) sink += i + (long)a;
  return 0;
}
static long vfork_ms;
static void *vforker(void *a) {
  (void)a;
  pid_t pid = vfork();
  if (pid == 0) {
    // The child borrows the parent's memory and stack: raw system calls
    // only, and never return.
    static const char ready[] = "ready\n";
    syscall(SYS_write, 1, ready, sizeof ready - 1);
    struct timespec ts = {vfork_ms / 1000, (vfork_ms % 1000) * 1000000L};
    syscall(SYS_nanosleep, &ts, 0);
    syscall(SYS_exit, 0);
  }
  waitpid(pid, 0, 0);
  printf("back\n");
  return 0;
}
static int many_pipe[2];
static volatile int many_futex, many_started;
static void *blocker(void *a) {
  __atomic_add_fetch(&many_started, 1, __ATOMIC_SEQ_CST);
  char c;
  switch ((long)a % 3) {
  case 0:
    for (;;) { struct timespec ts = {3600, 0}; nanosleep(&ts, 0); }
  case 1:
    for (;;) syscall(SYS_futex, &many_futex, 0 /* FUTEX_WAIT */, 0, 0, 0, 0);
  default:
    for (;;) syscall(SYS_read, many_pipe[0], &c, 1);
  }
  return 0;
}
static void *many_spinner(void *a) {
  __atomic_add_fetch(&many_started, 1, __ATOMIC_SEQ_CST);
  return spinner(a);
}

static void handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, 0);
}

int main(int argc, char **argv) {
  setvbuf(stdout, 0, _IONBF, 0);
  if (argc < 2) return 2;
  const char *mode = argv[1];
  pthread_t t;
  if (!strcmp(mode, "spin")) {
    int n = argc > 2 ? atoi(argv[2]) : 1;
    for (int i = 1; i < n; i++) pthread_create(&t, 0, spinner, 0);
    printf("ready\n");
    spinner(0);
  } else if (!strcmp(mode, "signals")) {
    handle(SIGUSR1, on_usr1);
    handle(SIGRTMIN + 6, on_rt);
    handle(SIGTERM, on_term);
    pthread_create(&t, 0, spinner, 0);
    printf("ready\n");
    while (!term) spin_leaf();
    printf("usr1=%d rt=%d\n", (int)usr1, (int)rt);
    return 0;
  } else if (!strcmp(mode, "churn")) {
    printf("ready\n");
    for (long k = 0;; k++) {
      pthread_t ts[4];
      for (int i = 0; i < 4; i++) pthread_create(&ts[i], 0, short_worker, (void *)k);
      for (int i = 0; i < 4; i++) pthread_join(ts[i], 0);
    }
  } else if (!strcmp(mode, "vfork")) {
    vfork_ms = argc > 2 ? atol(argv[2]) : 2000;
    pthread_create(&t, 0, spinner, 0);
    pthread_t v;
    pthread_create(&v, 0, vforker, 0);
    pthread_join(v, 0);
    printf("done\n");
    for (;;) pause();
  } else if (!strcmp(mode, "many")) {
    int n = argc > 2 ? atoi(argv[2]) : 100, spin = argc > 3 ? atoi(argv[3]) : 0;
    if (pipe(many_pipe) != 0) return 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < n; i++)
      pthread_create(&t, &attr, i < spin ? many_spinner : blocker, (void *)i);
    while (many_started < n) usleep(1000);
    usleep(20000); // let the last ones reach their blocking call
    printf("ready\n");
    for (;;) pause();
  } else if (!strcmp(mode, "grow")) {
    int n = argc > 2 ? atoi(argv[2]) : 10, ms = argc > 3 ? atoi(argv[3]) : 5;
    if (pipe(many_pipe) != 0) return 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < n; i++) pthread_create(&t, &attr, blocker, (void *)i);
    while (many_started < n) usleep(1000);
    printf("ready\n");
    for (long i = n; i < n + 500; i++) {
      struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
      nanosleep(&ts, 0);
      pthread_create(&t, &attr, blocker, (void *)i);
    }
    for (;;) pause();
  } else if (!strcmp(mode, "exit")) {
    int ms = argc > 2 ? atoi(argv[2]) : 100;
    pthread_create(&t, 0, spinner, 0);
    pthread_create(&t, 0, spinner, 0);
    printf("ready\n");
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, 0);
    exit(7);
  } else if (!strcmp(mode, "leaderexit")) {
    /* The main thread leaves on "go" (a line on stdin); the spinners
       go on, the leader a zombie until they end. */
    pthread_create(&t, 0, spinner, 0);
    printf("ready\n");
    char line[8];
    if (fgets(line, sizeof line, stdin)) pthread_exit(0);
    return 3;
  }
  return 2;
}
