package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"codeberg.org/stacktop/stacktop/internal/live"
	"codeberg.org/stacktop/stacktop/internal/session"
	"codeberg.org/stacktop/stacktop/internal/spawn"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/tui"
)

// testEngineHook, set only in a build with the stacktop_testhooks tag
// (testhooks.go), runs at the start of the engine's goroutine: it lets a
// test make that goroutine panic.
var testEngineHook func(context.Context)

// Exit codes of `stacktop top`, documented in docs/top.md.
const (
	exitTopOK      = 0 // the user quit (or the target exited and the user quit)
	exitTopNothing = 2 // nothing to show: no such process, attach refused, the command did not start
	exitTopUI      = 3 // the terminal UI failed (no terminal, a panic in the UI)
	exitTopRefused = 4 // --backend perf: the kernel refused the sampling event
	exitTopSampler = 5 // the sampler failed (a panic in the engine, printed); the target was let go
)

func init() {
	register(newTopCommand)
}

// topFlags are top's: sampling, and how the view starts.
type topFlags struct {
	samplingFlags
	window     time.Duration
	cumulative bool
	sortTotal  bool
}

func newTopCommand() *cobra.Command {
	f := &topFlags{}
	cmd := &cobra.Command{
		Use:   "top -p PID[,PID...] [flags]",
		Short: "live, top-like view of where a process spends its time",
		Long: `Top samples running processes (-p), or a command it starts (-- CMD, whose
output is discarded), and shows in the terminal, refreshed as it samples,
the functions the threads spend their time in over a sliding window, as a
call tree, or per thread. ? lists the keys; q quits and lets the process go.`,
		Example: `  # where process 1234 spends its time now
  stacktop top -p 1234

  # everything since the start, by total, of a command
  stacktop top --cumulative --sort-total -- ./server --port 8080`,
		Annotations: map[string]string{
			annotationMoreUsage: "stacktop top [flags] -- CMD [ARGS...]   (CMD's output is discarded)",
			annotationExitCodes: "top.md",
		},
		RunE: func(cmd *cobra.Command, args []string) error { return exitStatus(runTop(cmd, f, args)) },
	}
	fs := cmd.Flags()
	f.samplingFlags.addTo(fs, "watch")
	fs.DurationVar(&f.window, "window", 5*time.Second, "length of the sliding window (w toggles cumulative)")
	fs.BoolVar(&f.cumulative, "cumulative", false, "start with everything since the start instead of the window")
	fs.BoolVar(&f.sortTotal, "sort-total", false, "start with functions sorted by total instead of self (t and s switch)")
	setGroup(fs, groupView, "window", "cumulative", "sort-total")
	takesCommand(cmd)
	return cmd
}

// runTop runs `stacktop top` with cobra's parse of the flags (f) and the
// arguments after them: the command to start, if any.
func runTop(cmd *cobra.Command, f *topFlags, cmdArgs []string) int {
	code, ok := f.checkArgs(cmd, cmdArgs, func() error {
		if len(f.tids) > 0 && (len(f.pids) > 1 || f.subprocs) {
			return fmt.Errorf("--tid names threads of one process: not with several -p or --subprocesses")
		}
		return checkDuration("window", f.window, maxDuration, true)
	})
	if !ok {
		return code
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// SIGTERM and SIGHUP (the terminal closing) end the UI; the deferred
	// detach in withTracer then runs. A second signal detaches at once.
	return withTracer(func(os.Signal) { cancel() }, func(tr *ptrace.Tracer) int {
		devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return exitTopNothing
		}
		opts := f.sessionOptions()
		// The UI aggregates the last --window, everything, or everything
		// since a reset (by subtraction): older events can be folded, so
		// memory stays bounded on long sessions.
		opts.Timeline = f.window
		sess, err := f.startSession(tr, cmdArgs, [3]*os.File{devnull, devnull, devnull}, opts)
		devnull.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			if perfRefused(err) && len(cmdArgs) == 0 {
				return exitTopRefused
			}
			return spawn.FailureCode(err, exitTopNothing)
		}
		defer sess.Close()
		closeTargets := sess.Detach
		defer func() { closeTargets() }()
		eng, child := sess.Engine, sess.Child
		src := live.New(eng)
		if f.threadRE != nil {
			src.SetFilter(threadFilter(f.threadRE))
		}
		var ui tui.Source = src
		run := eng.Run
		if len(f.pids) > 1 || f.subprocs {
			// Several processes: one engine each, their snapshots
			// merged at every poll (see procgroup).
			fl := newProcessGroup(tr, &f.samplingFlags, opts, sess)
			closeTargets = func() error {
				err := fl.Detach()
				fl.Close()
				return err
			}
			for _, pid := range f.pids[min(1, len(f.pids)):] {
				if err := fl.Attach(pid); err != nil {
					fmt.Fprintln(os.Stderr, "stacktop:", err)
					if perfRefused(err) {
						return exitTopRefused
					}
					return exitTopNothing
				}
			}
			ui = groupSource{fl: fl, filter: threadFilter(f.threadRE)}
			run = func(ctx context.Context) error { return errors.Join(fl.Run(ctx, f.subprocs)...) }
		}
		engineDone := make(chan error, 1)
		go func() {
			// A panic here would end the program from this goroutine,
			// past every deferred clean-up of the main one: the terminal
			// left in the alternate screen, the threads in a batch left
			// stopped until the kernel detached them. It ends the UI
			// instead, and the clean-ups run.
			defer func() {
				if p := recover(); p != nil {
					engineDone <- &tui.PanicError{Value: p, Stack: debug.Stack()}
					cancel()
				}
			}()
			if testEngineHook != nil {
				testEngineHook(ctx)
			}
			err := run(ctx)
			if child != nil && ctx.Err() == nil {
				// The target exited: say how, and keep the last data on screen.
				if status, werr := child.Wait(); werr == nil {
					msg := fmt.Sprintf("%s exited with status %d", procmaps.EscapeControl(cmdArgs[0]), status)
					if sess.Execs() == 0 && (status == spawn.ExitNotFound || status == spawn.ExitNotExecutable) {
						msg = fmt.Sprintf("cannot run %s: it could not be executed (exit status %d)", procmaps.EscapeControl(cmdArgs[0]), status)
					}
					src.SetExitMsg(msg)
				}
			}
			engineDone <- err
		}()

		uiErr := tui.Run(ctx, ui, tui.Options{Window: f.window, Cumulative: f.cumulative,
			SortByTotal: f.sortTotal, RateAsked: f.rate, NoStops: sess.Backend == session.Perf})
		cancel()
		engErr := <-engineDone
		code := exitTopOK
		var pe *tui.PanicError
		switch {
		case errors.Is(uiErr, tui.ErrHangup):
			// Nobody may read this; a log that stderr goes to will.
			fmt.Fprintln(os.Stderr, "stacktop: the terminal hung up; detaching from the target")
		case errors.As(uiErr, &pe):
			fmt.Fprintf(os.Stderr, "stacktop: the terminal UI failed: %v\n%s", pe.Value, pe.Stack)
			code = exitTopUI
		case uiErr != nil && !errors.Is(uiErr, context.Canceled):
			fmt.Fprintln(os.Stderr, "stacktop:", uiErr)
			code = exitTopUI
		}
		switch {
		case errors.As(engErr, &pe):
			fmt.Fprintf(os.Stderr, "stacktop: the sampler failed (the target was let go): %v\n%s", pe.Value, pe.Stack)
			code = exitTopSampler
		case engErr != nil && !errors.Is(engErr, context.Canceled):
			fmt.Fprintln(os.Stderr, "stacktop:", engErr)
		}
		return code
	})
}
