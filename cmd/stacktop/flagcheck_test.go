package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestNumericFlags runs the real binary with every nonsense numeric value
// on every sampling subcommand: each must be a usage error that names the
// flag, quickly, before anything is attached (PID 1 is never touched), and
// never a crash dump.
func TestNumericFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cmds []string
		flag string
		args []string
	}{
		{[]string{"record", "top"}, "rate", []string{"--rate", "NaN"}},
		{[]string{"record", "top"}, "rate", []string{"--rate", "-5"}},
		{[]string{"record", "top"}, "rate", []string{"--rate", "0"}},
		{[]string{"record", "top"}, "rate", []string{"--rate", "+Inf"}},
		{[]string{"record", "top"}, "rate", []string{"--rate", "10001"}},
		{[]string{"record", "top", "dump"}, "stack-window", []string{"--stack-window", "-1"}},
		{[]string{"record", "top", "dump"}, "stack-window", []string{"--stack-window", "0"}},
		{[]string{"record", "top", "dump"}, "stack-window", []string{"--stack-window", "1TiB"}},
		{[]string{"record", "top", "dump"}, "stack-window", []string{"--stack-window", "1099511627776"}},
		{[]string{"record", "top", "dump"}, "stack-window", []string{"--stack-window", "99999999999999999999"}},
		{[]string{"record"}, "duration", []string{"--duration", "-3s"}},
		{[]string{"record"}, "duration", []string{"--duration", "0"}},
		{[]string{"top"}, "window", []string{"--window", "-1s"}},
		{[]string{"dump", "record", "top"}, "tid", []string{"--tid", "-4"}},
		{[]string{"dump", "record", "top"}, "tid", []string{"--tid", "4194305"}},
		{[]string{"dump", "record", "top"}, "tid", []string{"--tid", "7,7"}},
	}
	for _, c := range cases {
		for _, cmd := range c.cmds {
			args := append([]string{cmd, "-p", "1"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			r := run(t, exec.CommandContext(ctx, stacktopBin, args...))
			cancel()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Errorf("stacktop %q: still running after %v", args, time.Since(start))
				continue
			}
			if r.code != exitUsage {
				t.Errorf("stacktop %q: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
			}
			first, _, _ := strings.Cut(r.stderr, "\n")
			if !strings.Contains(first, "-"+c.flag) {
				t.Errorf("stacktop %q: first line does not name --%s: %q", args, c.flag, first)
			}
			for _, crash := range []string{"goroutine ", "fatal error", "panic:", "out of memory"} {
				if strings.Contains(r.stderr, crash) {
					t.Errorf("stacktop %q: crash output (%q):\n%s", args, crash, r.stderr)
				}
			}
		}
	}
}

func TestSizeValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		"16384": 16384, "64KiB": 64 << 10, "64K": 64 << 10, "1MiB": 1 << 20, "2 GiB": 2 << 30,
		"1TiB": 1 << 40, "-1": -1, "12B": 12,
	} {
		var n int
		if err := (sizeValue{&n}).Set(in); err != nil || n != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "x", "1.5MiB", "16 KB", "9999999999TiB", "99999999999999999999"} {
		var n int
		if err := (sizeValue{&n}).Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, n)
		}
	}
}

// TestStackWindowDefaultPerBackend: without --stack-window a recording
// asks the back end for its own default (0: ptrace copies 16 KiB, perf
// 8 KiB, see perfevent.DefaultWindow); a window given is passed as is,
// also when it equals the ptrace default.
func TestStackWindowDefaultPerBackend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"--backend", "perf"}, 0},
		{[]string{"--stack-window", "16384"}, 16384},
		{[]string{"--backend", "perf", "--stack-window", "32KiB"}, 32768},
	} {
		var f samplingFlags
		fs := pflag.NewFlagSet("record", pflag.ContinueOnError)
		f.addTo(fs, "record")
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := f.sessionOptions().StackWindow; got != c.want {
			t.Errorf("%v: session StackWindow %d, want %d", c.args, got, c.want)
		}
		if f.stackWindow%8 != 0 || f.stackWindow <= 0 {
			t.Errorf("%v: --stack-window %d checked against the flag limits", c.args, f.stackWindow)
		}
	}
}
