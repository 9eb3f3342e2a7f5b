package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"codeberg.org/stacktop/stacktop/export/outfile"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// withTracer runs fn with a ptrace tracer and guarantees that the target is
// never left stopped or traced, whatever way stacktop ends: fn returning,
// SIGINT/SIGTERM/SIGHUP, or a panic. (SIGKILL needs no help: the kernel
// detaches seized tracees of a dead tracer and they keep running.)
//
// onSignal, if non-nil, is told of the first signal instead, so record can
// stop sampling and still write its file; a second signal detaches and exits.
func withTracer(onSignal func(os.Signal), fn func(tr *ptrace.Tracer) int) (code int) {
	if os.Getenv("STACKTOP_NO_REALTIME") != "" {
		ptrace.DisableRealtime() // see docs/dump.md
	}
	tr := ptrace.NewTracer()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if first && onSignal != nil {
					first = false
					onSignal(sig)
					continue
				}
				tr.DetachAll()
				outfile.RemoveTemps() // os.Exit skips the deferred clean-ups
				fmt.Fprintf(os.Stderr, "stacktop: %v: detached from the target\n", sig)
				os.Exit(128 + int(sig.(syscall.Signal)))
			}
		}
	}()
	defer func() {
		close(done)
		signal.Stop(sigs)
		if r := recover(); r != nil {
			tr.DetachAll()
			tr.Close()
			panic(r)
		}
		tr.DetachAll()
		tr.Close()
	}()
	return fn(tr)
}
