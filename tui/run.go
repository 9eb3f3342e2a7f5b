package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"
	"golang.org/x/sys/unix"
)

// PanicError is what Run returns when the UI (or the Source, called from
// the UI) panicked. The terminal has been restored by then.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tui: panic: %v", e.Value)
}

// crashBox records the first panic of the UI. The model is copied on every
// Update, so it holds a pointer to one box shared by all copies and by Run.
//
// Bubble Tea v1 recovers panics itself (in Update and View, which run on
// its event loop, and in commands), restores the terminal and returns
// ErrProgramKilled wrapping ErrProgramPanic, but it prints the value and
// stack to stdout and drops them from the error. Catching them first lets
// Run quit the program the ordinary way and return them.
type crashBox struct {
	mu   sync.Mutex
	err  *PanicError
	quit func() // asks the running program to quit; nil in tests
}

// crashMsg tells Update that a command goroutine panicked.
type crashMsg struct{}

func (c *crashBox) record(v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

func (c *crashBox) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *crashBox) quitFunc() func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.quit
}

func (c *crashBox) panicErr() *PanicError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Run shows the live UI on the terminal (alternate screen) until the user
// quits (q, Ctrl-C), ctx is done or the UI fails, and restores the terminal
// before it returns. It returns nil when the user quit, ctx.Err() when ctx
// ended it, a *PanicError when the UI or src panicked, or the error that
// stopped Bubble Tea (for instance, no terminal to read keys from).
//
// Run never touches the target: the caller detaches after Run returns,
// whatever it returned. Signals are the caller's: Bubble Tea's own handler
// is off (it sent a quit into a loop that a cancelled ctx had stopped
// reading, and its shutdown then waited for it: top hung after one
// SIGTERM in 11 of 30 tries), so a SIGTERM or SIGINT ends Run through ctx.
// Ctrl-C on the terminal arrives as a key in raw mode.
func Run(ctx context.Context, src Source, opt Options) (err error) {
	out := opt.Output
	if out == nil {
		out = os.Stdout
	}
	var in io.Reader = os.Stdin
	if opt.Input != nil {
		in = opt.Input
	}
	ctx, hungUp := context.WithCancelCause(ctx)
	defer hungUp(nil)
	go watchHangup(ctx, []any{in, out}, func() { hungUp(ErrHangup) })

	m := newModel(src, opt, termenv.NewOutput(out).EnvColorProfile())
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithAltScreen(), tea.WithOutput(out), tea.WithoutSignalHandler()}
	if opt.Input != nil {
		popts = append(popts, tea.WithInput(opt.Input))
	}
	p := tea.NewProgram(m, popts...)
	m.crash.mu.Lock()
	m.crash.quit = p.Quit
	m.crash.mu.Unlock()

	_, err = p.Run()
	if perr := m.crash.panicErr(); perr != nil {
		return perr
	}
	switch {
	case err == nil, errors.Is(err, tea.ErrInterrupted):
		return nil
	case ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, tea.ErrProgramPanic):
		if errors.Is(context.Cause(ctx), ErrHangup) {
			return ErrHangup
		}
		return ctx.Err()
	}
	return fmt.Errorf("tui: %w", err)
}

// ErrHangup is what Run returns when the terminal went away: its pty was
// closed (terminal window closed, ssh connection dropped) or its input
// reached end of file.
var ErrHangup = errors.New("tui: the terminal hung up")

// hangupPoll is how often watchHangup looks at the terminal; it bounds how
// long the UI outlives its terminal.
const hangupPoll = 200 * time.Millisecond

// watchHangup calls hangup once any of files that is an *os.File reports a
// hang-up, an error or a closed pipe, and returns when ctx is done.
//
// Bubble Tea alone would run on: a hung-up tty reads as end of file, which
// its input loop takes as "no more keys", and writes fail unseen. SIGHUP
// reaches only the session leader and the terminal's foreground process
// group, so a stacktop started any other way (setsid, a pty handed to a
// child) never hears of it and would keep the target traced.
func watchHangup(ctx context.Context, files []any, hangup func()) {
	var fds []unix.PollFd
	for _, f := range files {
		if f, ok := f.(*os.File); ok {
			fds = append(fds, unix.PollFd{Fd: int32(f.Fd())})
		}
	}
	if len(fds) == 0 {
		return
	}
	for ctx.Err() == nil {
		_, err := unix.Poll(fds, int(hangupPoll/time.Millisecond))
		if err != nil && err != unix.EINTR {
			return
		}
		for _, fd := range fds {
			if fd.Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				hangup()
				return
			}
		}
	}
}
