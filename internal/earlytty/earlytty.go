// Package earlytty stops the terminal queries that run before main.
//
// Bubble Tea's package init asks the terminal for its background colour
// (lipgloss.HasDarkBackground: an OSC 11 query and a cursor-position
// query) and waits up to termenv.OSCTimeout, 5 s, for the answer. A
// terminal that answers neither (a serial console, a pty with no emulator
// behind it, one being closed) held every stacktop command for 5 s before
// main ran. stacktop's UI never asks the default renderer for colours
// (tui uses its own renderer with a fixed dark background), so this
// package fixes the default renderer's background first and no query is
// sent at all. (termenv.OSCTimeout is a constant: it cannot be shortened.)
//
// It works by its import path: since Go 1.21 the package initialised next
// is the first ready one in import-path order, and this package's path
// (the module's, codeberg.org/...) sorts before
// "github.com/charmbracelet/bubbletea", so this init runs after lipgloss's
// and before Bubble Tea's. A module path that sorts after it would undo
// that: cmd/stacktop's TestEarlyInitRunsFirst checks the order. Importing
// it (for its side effect) is all a binary needs to do.
package earlytty

import "github.com/charmbracelet/lipgloss"

func init() {
	lipgloss.SetHasDarkBackground(true)
}
