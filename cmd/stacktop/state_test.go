package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// stateSource has a thread that spins, one that sleeps in nanosleep and
// one blocked in read on a pipe nobody writes.
const stateSource = `#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void spin_loop(void) { for (;;) sink++; }
__attribute__((noinline)) void sleeper_loop(void) { for (;;) usleep(100000); }
__attribute__((noinline)) void reader_wait(int fd) { char c; for (;;) read(fd, &c, 1); }
static void *spinner(void *a) { spin_loop(); return a; }
static void *sleeper(void *a) { sleeper_loop(); return a; }
int main(void) {
	int p[2];
	pthread_t t1, t2;
	if (pipe(p) != 0) return 1;
	pthread_create(&t1, 0, spinner, 0);
	pthread_create(&t2, 0, sleeper, 0);
	printf("ready\n");
	fflush(stdout);
	reader_wait(p[0]);
}
`

// TestRecordThreadStates: a wall-clock profile labels each sample with
// the thread's state (pprof label thread_state), and --blocked keeps only
// the time threads spent waiting: the spinner's frames are gone, the
// sleeper's and the reader's stay.
func TestRecordThreadStates(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "states.c")
	if err := os.WriteFile(src, []byte(stateSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "states")
	mustRun(t, "gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", bin, src)
	tg := targets.StartCommand(t, bin)
	<-tg.Ready()
	pid := strconv.Itoa(tg.PID())

	pb := filepath.Join(dir, "wall.pb.gz")
	if code, stderr := record(t, "-p", pid, "--idle", "--rate", "199", "--duration", "1s", "-o", pb); code != 0 {
		t.Fatalf("record --idle: exit %d\n%s", code, stderr)
	}
	states := map[string]map[string]int64{} // leaf-most of our functions -> state -> samples
	for _, s := range readPprof(t, pb).Sample {
		fn := ""
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if n := l.Function.Name; fn == "" && (n == "spin_loop" || n == "sleeper_loop" || n == "reader_wait") {
					fn = n
				}
			}
		}
		st := s.Label["thread_state"]
		if len(st) != 1 {
			t.Fatalf("a wall-clock sample without a thread_state label: %v", s.Label)
		}
		if states[fn] == nil {
			states[fn] = map[string]int64{}
		}
		states[fn][st[0]] += s.Value[0]
	}
	share := func(fn, state string) float64 {
		var all int64
		for _, n := range states[fn] {
			all += n
		}
		if all == 0 {
			t.Fatalf("no samples in %s: %v", fn, states)
		}
		return float64(states[fn][state]) / float64(all)
	}
	if s := share("spin_loop", "running"); s < 0.9 {
		t.Errorf("spin_loop running in %.0f%% of its samples, want nearly all: %v", 100*s, states)
	}
	for _, fn := range []string{"sleeper_loop", "reader_wait"} {
		if s := share(fn, "sleeping"); s < 0.9 {
			t.Errorf("%s sleeping in %.0f%% of its samples, want nearly all: %v", fn, 100*s, states)
		}
	}

	folded := filepath.Join(dir, "blocked.folded")
	if code, stderr := record(t, "-p", pid, "--idle", "--blocked", "--duration", "1s", "-o", folded); code != 0 {
		t.Fatalf("record --idle --blocked: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(folded)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "spin_loop") || !strings.Contains(string(b), "sleeper_loop") || !strings.Contains(string(b), "reader_wait") {
		t.Errorf("--blocked, want the sleeper and the reader and not the spinner:\n%s", b)
	}
	// The same view from the saved pprof.
	r := stacktop(t, "convert", pb, "--blocked", "-o", "-", "--format", "folded")
	if r.code != 0 || strings.Contains(r.stdout, "spin_loop") || !strings.Contains(r.stdout, "reader_wait") {
		t.Errorf("convert --blocked: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code, stderr := record(t, "-p", pid, "--blocked", "--duration", "1s", "-o", folded); code != exitUsage || !strings.Contains(stderr, "--idle") {
		t.Errorf("--blocked without --idle: exit %d\n%s", code, stderr)
	}
}
