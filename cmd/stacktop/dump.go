package main

import (
	"flag"
	"fmt"
	"os"

	"stacktop/ptrace"
	"stacktop/sampler"
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
	asJSON := fs.Bool("json", false, "print one JSON document (schema in the README)")
	freeze := fs.Bool("freeze", false, "hold all threads stopped for one consistent snapshot (deadlock analysis)")
	window := fs.Int("stack-window", sampler.DefaultStackWindow, "bytes of stack copied while a thread is stopped")
	noInline := fs.Bool("no-inline", false, "do not show inlined calls as frames of their own")
	noLines := fs.Bool("no-lines", false, "do not read DWARF: no file:line, no inlined frames")
	noCFI := fs.Bool("no-cfi", false, "unwind with SFrame and frame pointers only (shows what SFrame covers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop dump -p PID [--tid TID] [--json] [--freeze] [--no-inline] [--no-lines]")
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
	return withTracer(nil, func(tr *ptrace.Tracer) int {
		res, err := stackdump.Run(tr, *pid, stackdump.Options{
			TID: *tid, Freeze: *freeze, Sampler: sampler.Options{
				StackWindow: *window,
				NoCFI:       *noCFI,
				Symbols:     sampler.SymbolOptions{NoInline: *noInline, NoLines: *noLines, CacheDir: dwarfCacheDir()},
			},
		})
		if err != nil && (res == nil || len(res.Threads) == 0) {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return exitDumpNothing
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
