package main

import (
	"fmt"
	"regexp"

	"github.com/spf13/pflag"

	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/idlist"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/unwind"
)

// stackFlags are the flags dump, record and top share: which threads, how
// much stack, which unwinders, how much DWARF. One definition each, so the
// three subcommands spell and check them alike.
type stackFlags struct {
	tids        idlist.TIDs
	threadName  string
	stackWindow int
	unwinders   unwinderFlags
	noInline    bool
	noLines     bool
	maxDepth    int

	threadRE *regexp.Regexp  // compiled from threadName by check; nil: all
	methods  []unwind.Method // parsed from unwinders by check

	// stackWindowGiven: --stack-window was on the command line. If not,
	// a recording passes 0 and each back end applies its own default
	// (perfevent.DefaultWindow is smaller: the kernel copies it in the
	// sampled thread's interrupt).
	stackWindowGiven bool
}

// addTo defines the flags on fs; verb says what the subcommand does to
// a thread ("dump", "record", "watch").
func (f *stackFlags) addTo(fs *pflag.FlagSet, verb string) {
	fs.VarP(typedValue{&f.tids, "tids"}, "tid", "t", verb+" only these threads (comma-separated TIDs; the flag may repeat)")
	fs.StringVar(&f.threadName, "thread-name", "", verb+" only threads whose name matches this regular expression")
	setGroup(fs, groupTarget, "tid", "thread-name")
	f.stackWindow = ptracesampler.DefaultStackWindow
	windowHelp := "bytes of stack copied while a thread is stopped (e.g. 16384, 64KiB; --backend perf: 8192 unless given); a hint: with ptrace, more is copied where a thread's frames need it"
	if verb == "dump" {
		windowHelp = "bytes of stack copied while a thread is stopped when it is not on its own thread stack (e.g. 16384, 64KiB); on it, its used stack is copied"
	}
	fs.Var(windowValue{sizeValue{&f.stackWindow}, &f.stackWindowGiven}, "stack-window", windowHelp)
	f.unwinders.addTo(fs)
	fs.IntVar(&f.maxDepth, "max-depth", unwind.DefaultMaxDepth, "most frames of one stack; a deeper stack is cut there and says so")
	fs.BoolVar(&f.noInline, "no-inline", false, "do not show inlined calls as frames of their own")
	fs.BoolVar(&f.noLines, "no-lines", false, "do not read DWARF: no file:line, no inlined frames")
	setGroup(fs, groupStacks, "stack-window", "max-depth", "no-inline", "no-lines")
}

// check validates the flags and derives threadRE and methods.
func (f *stackFlags) check() error {
	if f.threadName != "" {
		re, err := regexp.Compile(f.threadName)
		if err != nil {
			return fmt.Errorf("--thread-name: %v", err)
		}
		f.threadRE = re
	}
	if err := checkSize("stack-window", f.stackWindow, maxStackWindow()); err != nil {
		return err
	}
	if f.maxDepth <= 0 || f.maxDepth > unwind.MaxMaxDepth {
		return fmt.Errorf("--max-depth %d: must be between 1 and %d frames", f.maxDepth, unwind.MaxMaxDepth)
	}
	f.methods = f.unwinders.methods()
	return nil
}

// resolveOptions are the resolver options the flags ask for; symbols may
// carry the subcommand's own settings (AsyncLines, CacheDir).
func (f *stackFlags) resolveOptions(symbols resolve.SymbolOptions) resolve.Options {
	symbols.NoInline, symbols.NoLines = f.noInline, f.noLines
	return resolve.Options{Symbols: symbols, NoCFI: f.unwinders.noCFI, Unwinders: f.methods, MaxDepth: f.maxDepth}
}

// windowValue is --stack-window: a size that records whether it was given.
type windowValue struct {
	sizeValue
	given *bool
}

func (v windowValue) Set(s string) error {
	*v.given = true
	return v.sizeValue.Set(s)
}
