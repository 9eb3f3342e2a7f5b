package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

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
	register(newDumpCommand)
}

// dumpFlags are dump's: one process, which threads, how to show them.
type dumpFlags struct {
	pidFlags
	stackFlags
	asJSON       bool
	freeze       bool
	noDebuginfod bool
}

func newDumpCommand() *cobra.Command {
	f := &dumpFlags{pidFlags: pidFlags{one: true}}
	cmd := &cobra.Command{
		Use:   "dump [-p] PID [flags]",
		Short: "print the stack of every thread once (pstack)",
		Long: `Dump prints the stack of every thread of a process once, as pstack and
eu-stack do, each thread stopped only for the tens of microseconds its
registers and stack take to copy. The summary on stderr says what was
truncated and why.`,
		Example: `  # every thread of process 1234
  stacktop dump 1234

  # one consistent snapshot as JSON, for a deadlock
  stacktop dump -p 1234 --freeze --json > stacks.json

  # only the threads named worker-*, without reading DWARF
  stacktop dump -p 1234 --thread-name '^worker-' --no-lines`,
		Annotations: map[string]string{annotationExitCodes: "dump.md"},
		RunE:        func(cmd *cobra.Command, args []string) error { return exitStatus(runDump(cmd, f, args)) },
	}
	fs := cmd.Flags()
	f.pidFlags.addTo(fs, "dump")
	f.stackFlags.addTo(fs, "dump")
	addDebuginfodFlag(fs, &f.noDebuginfod)
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON document (schema in docs/dump.md)")
	fs.BoolVar(&f.freeze, "freeze", false, "hold all threads stopped for one consistent snapshot (deadlock analysis)")
	setGroup(fs, groupOutput, "json")
	return cmd
}

// runDump runs `stacktop dump` with cobra's parse of the flags (f) and the
// arguments: the PID, if -p did not give it.
func runDump(cmd *cobra.Command, f *dumpFlags, args []string) int {
	pid := &f.pid
	// "stacktop dump PID", as pstack and eu-stack users type it; flags
	// may come before or after the PID.
	if len(args) > 0 {
		n, err := idlist.ParsePID(args[0])
		switch {
		case err != nil:
			return reportUsage(cmd, fmt.Errorf("%q is not a process ID", args[0]))
		case *pid != 0 && *pid != n:
			return reportUsage(cmd, fmt.Errorf("two processes given (%d and -p %d): dump one at a time", n, *pid))
		}
		*pid = n
		args = args[1:]
	}
	if *pid <= 0 || len(args) != 0 {
		writeUsage(os.Stderr, cmd)
		return exitUsage
	}
	if err := f.check(); err != nil {
		return reportUsage(cmd, err)
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
		prefetchDebuginfo(*pid, f.noDebuginfod)
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
			TID: tid, Freeze: f.freeze, Select: selectTID,
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
		if f.asJSON {
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
