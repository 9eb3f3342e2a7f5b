package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"stacktop/live"
	"stacktop/ptrace"
	"stacktop/tui"
)

// Exit codes of `stacktop top`, documented in docs/top.md.
const (
	exitTopOK      = 0 // the user quit (or the target exited and the user quit)
	exitTopNothing = 2 // nothing to show: no such process, attach refused, the command did not start
	exitTopUI      = 3 // the terminal UI failed (no terminal, a panic in the UI)
)

func init() {
	register(command{name: "top", brief: "live, top-like view of where a process spends its time", run: runTop})
}

func runTop(args []string) int {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	var f samplingFlags
	f.register(fs, "watch")
	window := fs.Duration("window", 5*time.Second, "length of the sliding window (w toggles cumulative)")
	cumulative := fs.Bool("cumulative", false, "start with everything since the start instead of the window")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop top -p PID [flags]\n       stacktop top [flags] -- CMD [ARGS...]   (CMD's output is discarded)")
		fs.PrintDefaults()
	}
	cmdArgs, code, ok := f.parse(fs, args, func() error {
		return checkDuration("window", *window, maxDuration, true)
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
		opts := f.engineOptions()
		// The UI aggregates the last --window, everything, or everything
		// since a reset (by subtraction): older events can be folded, so
		// memory stays bounded on long sessions.
		opts.Timeline = *window
		sess, err := f.startSession(tr, cmdArgs, [3]*os.File{devnull, devnull, devnull}, opts)
		devnull.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return exitTopNothing
		}
		defer sess.close()
		defer sess.target.Close()
		eng, child := sess.engine, sess.child
		src := live.New(eng)
		engineDone := make(chan error, 1)
		go func() {
			err := eng.Run(ctx)
			if child != nil && ctx.Err() == nil {
				// The target exited: say how, and keep the last data on screen.
				if status, werr := child.wait(); werr == nil {
					src.SetExitMsg(fmt.Sprintf("%s exited with status %d", cmdArgs[0], status))
				}
			}
			engineDone <- err
		}()

		uiErr := tui.Run(ctx, src, tui.Options{Window: *window, Cumulative: *cumulative})
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
		if engErr != nil && !errors.Is(engErr, context.Canceled) {
			fmt.Fprintln(os.Stderr, "stacktop:", engErr)
		}
		return code
	})
}
