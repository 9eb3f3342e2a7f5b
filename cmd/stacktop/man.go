package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func init() {
	register(newManCommand)
}

// manPageDate is the date the man pages carry. It is fixed, not the day
// they are generated, so that regenerating them changes nothing unless the
// command line changed (TestManPagesUpToDate compares them with docs/man);
// move it on when the pages change for a release.
var manPageDate = time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC)

// newManCommand is the hidden `stacktop man DIR`, which writes a man page
// per command (stacktop.1, stacktop-record.1, ...) from the command tree:
// docs/man is made with `go run ./cmd/stacktop man docs/man`.
func newManCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "write the man pages into DIR",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				fmt.Fprintln(os.Stderr, "usage: stacktop man DIR")
				return exitStatus(exitUsage)
			}
			if err := writeManPages(cmd.Root(), args[0]); err != nil {
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				return exitStatus(1)
			}
			return nil
		},
	}
}

func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return doc.GenManTree(root, &doc.GenManHeader{
		Section: "1",
		Source:  "stacktop",
		Manual:  "stacktop manual",
		Date:    &manPageDate,
	}, dir)
}
