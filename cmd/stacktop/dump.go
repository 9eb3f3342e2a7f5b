package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"

	"codeberg.org/stacktop/stacktop/internal/idlist"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/stackdump"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// Exit codes of `stacktop dump`, documented in docs/dump.md.
const (
	exitDumpComplete  = 0 // every thread unwound to its outermost frame
	exitDumpTruncated = 1 // some stacks are truncated
	exitDumpNothing   = 2 // nothing dumped: no such process, attach refused, ...
)

func init() {
	register(command{name: "dump", brief: "print the stack of every thread once (pstack)", run: runDump})
}

func runDump(args []string) int {
	// First of all: until then the target's busy threads share the CPUs
	// with ours as equals (a usage error is no worse for it).
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	var pidFlag idlist.PID
	fs.Var(&pidFlag, "p", "process to dump (required)")
	pid := (*int)(&pidFlag)
	var f stackFlags
	f.register(fs, "dump")
	asJSON := fs.Bool("json", false, "print one JSON document (schema in docs/dump.md)")
	freeze := fs.Bool("freeze", false, "hold all threads stopped for one consistent snapshot (deadlock analysis)")
	noDebuginfod := registerDebuginfod(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop dump [-p] PID [--tid TID[,TID...]] [--thread-name REGEX] [--json] [--freeze] [--no-inline] [--no-lines] [--max-depth N]")
		fs.PrintDefaults()
		exitCodesUsage(fs, "dump.md")
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return exitUsage
	}
	// "stacktop dump PID", as pstack and eu-stack users type it; flags
	// may follow the PID.
	if *pid == 0 && fs.NArg() > 0 {
		n, err := idlist.ParsePID(fs.Arg(0))
		if err != nil {
			return reportUsage(fs, fmt.Errorf("%q is not a process ID", fs.Arg(0)))
		}
		*pid = n
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return exitUsage
		}
		if *pid != n {
			return reportUsage(fs, fmt.Errorf("two processes given (%d and -p %d): dump one at a time", n, *pid))
		}
	}
	if *pid <= 0 || fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	if err := f.check(); err != nil {
		return reportUsage(fs, err)
	}
	nameRE := f.threadRE
	if len(f.tids) > 0 {
		// Checked before attaching, as record and top do (a process
		// that cannot be listed is left to the attach to explain);
		// stackdump checks a single TID again once attached.
		if threads, err := procmaps.Threads(*pid); err == nil {
			if err := idlist.CheckThreads(*pid, f.tids, threads); err != nil {
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				return exitDumpNothing
			}
		}
	}
	if !f.noLines {
		prefetchDebuginfo(*pid, *noDebuginfod)
	}
	var selectTID func(int) bool
	if nameRE != nil || len(f.tids) > 1 {
		// Threads not asked for are not stopped at all.
		selectTID = func(tid int) bool {
			if len(f.tids) > 1 && !slices.Contains(f.tids, tid) {
				return false
			}
			if nameRE == nil {
				return true
			}
			st, err := procmaps.ReadStat(*pid, tid)
			return err != nil || nameRE.MatchString(st.Comm) // unreadable: let the sample say why
		}
	}
	tid := 0
	if len(f.tids) == 1 {
		tid = f.tids[0]
	}
	return withTracer(nil, func(tr *ptrace.Tracer) int {
		res, err := stackdump.Run(tr, *pid, stackdump.Options{
			TID: tid, Freeze: *freeze, Select: selectTID,
			StackWindow: f.stackWindow,
			Resolve:     f.resolveOptions(resolve.SymbolOptions{CacheDir: dwarfCacheDir()}),
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
				fmt.Fprintf(os.Stderr, "stacktop: no thread of process %d has a name matching %q (names are in /proc/%d/task/*/comm)\n", *pid, f.threadName, *pid)
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
