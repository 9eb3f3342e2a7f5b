// Command stacktop samples the stacks of running Linux processes.
//
// Usage:
//
//	stacktop sframe [--rows|--json] FILE...   inspect .sframe sections
//	stacktop dump -p PID [--tid LIST] [--json] one-shot stacks of every thread
//	stacktop record ...                       scripted sampling to profile files
//	stacktop top ...                          live terminal UI
//	stacktop convert IN -o OUT [--diff BASE]  another format, or a diff flame graph
//	stacktop --version                        version and VCS revision
//	stacktop completion bash|zsh|fish         shell completion script
//
// Exit codes are documented per subcommand in docs/*.md (each -h names its
// page); 64 is always a usage error.
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

type command struct {
	name  string
	brief string
	run   func(args []string) int
}

// commands is filled by each subcommand's file in its init function, so
// adding a subcommand touches only its own file.
var commands []command

func register(c command) { commands = append(commands, c) }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stacktop COMMAND [flags] [args]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.brief)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'stacktop COMMAND -h' for a command's flags.")
}

func main() {
	selfsched.Settle(len(os.Args) > 1 && os.Args[1] == "dump") // (package early)
	if len(os.Args) < 2 {
		usage()
		os.Exit(exitUsage)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage()
		os.Exit(0)
	}
	if name == "--version" || name == "-version" {
		os.Exit(runVersion(os.Args[2:]))
	}
	for _, c := range commands {
		if c.name == name {
			stop := profileSelf()
			code := c.run(os.Args[2:])
			stop()
			os.Exit(code)
		}
	}
	fmt.Fprintf(os.Stderr, "stacktop: unknown command %q\n", name)
	usage()
	os.Exit(exitUsage)
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
