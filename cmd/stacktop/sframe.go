package main

import (
	"os"

	"github.com/spf13/cobra"

	"codeberg.org/stacktop/stacktop/internal/sframereport"
)

// Exit codes of `stacktop sframe`, documented in docs/sframe-inspector.md.
const (
	exitSFrameOK      = 0 // every file has valid SFrame data
	exitSFrameNone    = 1 // some file has no SFrame data
	exitSFrameCorrupt = 2 // some file is corrupt, unreadable or not ELF
)

func init() {
	register(newSFrameCommand)
}

func newSFrameCommand() *cobra.Command {
	var rows, asJSON bool
	cmd := &cobra.Command{
		Use:   "sframe [--rows|--json] [flags] FILE...",
		Short: "inspect .sframe sections: coverage, rows, JSON",
		Long: `Sframe reads the .sframe section of ELF executables, shared objects and
relocatable objects, and reports per file its SFrame version, what the
functions it describes cover of the code, and any corruption.`,
		Example: `  # is this binary SFrame-ready, and where are the holes?
  stacktop sframe ./server

  # every function and row, as binutils' readelf --sframe prints them
  stacktop sframe --rows /usr/lib/x86_64-linux-gnu/libc.so.6`,
		Annotations: map[string]string{annotationExitCodes: "sframe-inspector.md"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runSFrame(cmd, args, rows, asJSON))
		},
	}
	cmd.Flags().BoolVar(&rows, "rows", false, "print every function and row in the notation of binutils 2.46 readelf --sframe")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document with header, functions, rows and coverage")
	return cmd
}

func runSFrame(cmd *cobra.Command, files []string, rows, asJSON bool) int {
	if len(files) == 0 || (rows && asJSON) {
		writeUsage(os.Stderr, cmd)
		return exitUsage
	}
	mode := sframereport.ModeSummary
	switch {
	case rows:
		mode = sframereport.ModeRows
	case asJSON:
		mode = sframereport.ModeJSON
	}
	switch sframereport.Run(os.Stdout, os.Stderr, files, mode) {
	case sframereport.OutcomeOK:
		return exitSFrameOK
	case sframereport.OutcomeNoSFrame:
		return exitSFrameNone
	}
	return exitSFrameCorrupt
}
