package main

import (
	"flag"
	"fmt"
	"os"

	"codeberg.org/stacktop/stacktop/internal/sframereport"
)

// Exit codes of `stacktop sframe`, documented in docs/sframe-inspector.md.
const (
	exitSFrameOK      = 0 // every file has valid SFrame data
	exitSFrameNone    = 1 // some file has no SFrame data
	exitSFrameCorrupt = 2 // some file is corrupt, unreadable or not ELF
)

func init() {
	register(command{name: "sframe", brief: "inspect .sframe sections: coverage, rows, JSON", run: runSFrame})
}

func runSFrame(args []string) int {
	fs := flag.NewFlagSet("sframe", flag.ContinueOnError)
	rows := fs.Bool("rows", false, "print every function and row in the notation of binutils 2.46 readelf --sframe")
	asJSON := fs.Bool("json", false, "print one JSON document with header, functions, rows and coverage")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop sframe [--rows|--json] FILE...")
		fs.PrintDefaults()
		exitCodesUsage(fs, "sframe-inspector.md")
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() == 0 || (*rows && *asJSON) {
		fs.Usage()
		return exitUsage
	}
	mode := sframereport.ModeSummary
	switch {
	case *rows:
		mode = sframereport.ModeRows
	case *asJSON:
		mode = sframereport.ModeJSON
	}
	switch sframereport.Run(os.Stdout, os.Stderr, fs.Args(), mode) {
	case sframereport.OutcomeOK:
		return exitSFrameOK
	case sframereport.OutcomeNoSFrame:
		return exitSFrameNone
	}
	return exitSFrameCorrupt
}
