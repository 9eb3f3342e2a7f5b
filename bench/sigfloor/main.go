// Command sigfloor is bench/signal-exit.sh's floor: a Go program that does
// nothing but exit on SIGTERM or SIGINT, through os/signal as stacktop
// does. The time from the kill to its exit, beside a spinning target, is
// what the machine's scheduler and Go's signal delivery cost before
// stacktop's own code runs at all.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	os.Exit(0)
}
