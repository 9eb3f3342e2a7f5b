package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"

	"stacktop/internal/ptracesampler"
	"stacktop/internal/resolve"
	"stacktop/procmaps"
	"stacktop/ptrace"
	"stacktop/stackdump"
)

// Exit codes of `stacktop dump`, documented in the README.
const (
	exitDumpComplete  = 0 // every thread unwound to its outermost frame
	exitDumpTruncated = 1 // some stacks are truncated
	exitDumpNothing   = 2 // nothing dumped: no such process, attach refused, ...
)

func init() {
	register(command{name: "dump", brief: "print the stack of every thread once (pstack)", run: runDump})
}

func runDump(args []string) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	pid := fs.Int("p", 0, "process to dump (required)")
	tid := fs.Int("tid", 0, "dump only this thread")
	threadName := fs.String("thread-name", "", "dump only threads whose name matches this regular expression")
	asJSON := fs.Bool("json", false, "print one JSON document (schema in docs/dump.md)")
	freeze := fs.Bool("freeze", false, "hold all threads stopped for one consistent snapshot (deadlock analysis)")
	window := new(int)
	*window = ptracesampler.DefaultStackWindow
	fs.Var(sizeValue{window}, "stack-window", "bytes of stack copied while a thread is stopped (e.g. 16384, 64KiB)")
	noInline := fs.Bool("no-inline", false, "do not show inlined calls as frames of their own")
	noLines := fs.Bool("no-lines", false, "do not read DWARF: no file:line, no inlined frames")
	var unwinders unwinderFlags
	unwinders.register(fs)
	noDebuginfod := registerDebuginfod(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop dump -p PID [--tid TID] [--thread-name REGEX] [--json] [--freeze] [--no-inline] [--no-lines]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return exitUsage
	}
	if *pid <= 0 || fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	if err := checkFlags(
		checkInt("tid", *tid, 0, maxPID),
		checkSize("stack-window", *window, maxStackWindow()),
	); err != nil {
		return reportUsage(fs, err)
	}
	var nameRE *regexp.Regexp
	if *threadName != "" {
		re, err := regexp.Compile(*threadName)
		if err != nil {
			return reportUsage(fs, fmt.Errorf("--thread-name: %v", err))
		}
		nameRE = re
	}
	methods, err := unwinders.methods()
	if err != nil {
		return reportUsage(fs, err)
	}
	if !*noLines {
		prefetchDebuginfo(*pid, *noDebuginfod)
	}
	var selectTID func(int) bool
	if nameRE != nil {
		// Threads whose name does not match are not stopped at all.
		selectTID = func(tid int) bool {
			st, err := procmaps.ReadStat(*pid, tid)
			return err != nil || nameRE.MatchString(st.Comm) // unreadable: let the sample say why
		}
	}
	return withTracer(nil, func(tr *ptrace.Tracer) int {
		res, err := stackdump.Run(tr, *pid, stackdump.Options{
			TID: *tid, Freeze: *freeze, Select: selectTID, StackWindow: *window, Resolve: resolve.Options{
				NoCFI:     unwinders.noCFI,
				Unwinders: methods,
				Symbols:   resolve.SymbolOptions{NoInline: *noInline, NoLines: *noLines, CacheDir: dwarfCacheDir()},
			},
		})
		if nameRE != nil && errors.Is(err, stackdump.ErrNoThreads) {
			res, err = &stackdump.Result{}, nil // said below: no name matched
		}
		if err != nil && (res == nil || len(res.Threads) == 0) {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return exitDumpNothing
		}
		if nameRE != nil {
			// A thread can rename itself between the selection and
			// its sample: show only those whose sampled name matches.
			kept := res.Threads[:0]
			for _, ts := range res.Threads {
				if nameRE.MatchString(ts.Name) {
					kept = append(kept, ts)
				}
			}
			res.Threads = kept
			if len(kept) == 0 {
				fmt.Fprintf(os.Stderr, "stacktop: no thread of process %d has a name matching %q (names are in /proc/%d/task/*/comm)\n", *pid, *threadName, *pid)
				return exitDumpNothing
			}
		}
		if err != nil {
			// The stacks are there; say what went wrong after them (a
			// detach that left a thread traced, say).
			defer fmt.Fprintln(os.Stderr, "stacktop:", err)
		}
		if *asJSON {
			err = stackdump.WriteJSON(os.Stdout, res)
		} else {
			err = stackdump.WriteText(os.Stdout, res)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
		}
		stackdump.WriteSummary(os.Stderr, res)
		if !res.Complete() {
			return exitDumpTruncated
		}
		return exitDumpComplete
	})
}
