// Command stacktop samples the stacks of running Linux processes.
//
// Usage:
//
//	stacktop dump [-p] PID [flags]             one-shot stacks of every thread
//	stacktop record -p PID[,PID...] [flags]    scripted sampling to profile files
//	stacktop record [flags] -- CMD [ARGS...]
//	stacktop top -p PID[,PID...] [flags]       live terminal UI
//	stacktop convert IN -o OUT [--diff BASE]   another format, or a diff flame graph
//	stacktop sframe [--rows|--json] FILE...    inspect .sframe sections
//	stacktop --version                         version and VCS revision
//	stacktop completion bash|zsh|fish|powershell
//	                                           shell completion script
//
// The command line is cobra's, with GNU long flags (cli.go); stacktop
// COMMAND --help lists a command's flags. Exit codes are documented per
// subcommand in docs/*.md (each --help names its page); 64 is always a
// usage error.
//
// This package holds flags, wiring and output only: starting a command
// (internal/spawn), writing an output file (export/outfile), PID and TID
// lists (internal/idlist) and sampling several processes as one
// (internal/procgroup) live in packages of their own.
package main

import (
	_ "codeberg.org/stacktop/stacktop/internal/earlytty" // before Bubble Tea's init: no 5 s terminal query (see its doc)

	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"codeberg.org/stacktop/stacktop/internal/selfsched"
)

// exitUsage is the sysexits EX_USAGE code every subcommand uses for bad flags.
const exitUsage = 64

func main() {
	selfsched.Settle(len(os.Args) > 1 && os.Args[1] == "dump") // (package early)
	root := newRootCommand()
	stop := profileSelf()
	code := execute(root, gnuLongFlags(root, os.Args[1:]))
	stop()
	os.Exit(code)
}

// profileSelf writes a CPU profile of stacktop itself to the file named by
// STACKTOP_CPUPROFILE, and a heap profile at exit to STACKTOP_MEMPROFILE,
// for work on stacktop's own overhead and memory (bench/).
func profileSelf() (stop func()) {
	if os.Getenv("STACKTOP_MEMPROFILE") != "" {
		// One sample per 4 KiB allocated, not Go's default 512 KiB: a
		// short dump allocates a few MB, which the default shows as a
		// handful of samples that say little about what holds memory.
		runtime.MemProfileRate = 4096
	}
	stopCPU := profileCPU()
	return func() {
		stopCPU()
		if path := os.Getenv("STACKTOP_MEMPROFILE"); path != "" {
			f, err := os.Create(path)
			if err == nil {
				// No runtime.GC first: the profile is that of the last
				// collection, during the run, not of the torn-down end.
				err = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "stacktop: STACKTOP_MEMPROFILE: %v\n", err)
			}
		}
	}
}

func profileCPU() (stop func()) {
	path := os.Getenv("STACKTOP_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stacktop: STACKTOP_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
