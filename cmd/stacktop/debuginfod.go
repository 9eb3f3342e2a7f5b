package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"codeberg.org/stacktop/stacktop/debuginfo/debuginfod"
)

// addDebuginfodFlag adds --no-debuginfod to a subcommand.
func addDebuginfodFlag(fs *pflag.FlagSet, off *bool) {
	fs.BoolVar(off, "no-debuginfod", false, "do not fetch missing debug files from the DEBUGINFOD_URLS servers (the debuginfod cache is still read)")
	setGroup(fs, groupStacks, "no-debuginfod")
}

// prefetchDebuginfo fetches, before stacktop attaches (so no thread is
// stopped while it waits), the debug files pid's objects lack, from the
// servers DEBUGINFOD_URLS names, into the cache eu-stack and gdb use.
// Failures cost lines, never the run: they are reported and ignored.
func prefetchDebuginfo(pid int, off bool) {
	if off || pid <= 0 {
		return
	}
	c, err := debuginfod.FromEnv(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return
	}
	if c == nil {
		return
	}
	if _, err := c.Prefetch(context.Background(), pid); err != nil {
		fmt.Fprintln(os.Stderr, "stacktop: debuginfod:", err)
	}
}
