// Package tui is the terminal UI of "stacktop top": live aggregated stacks
// of a running process, in the manner of py-spy top and perf top.
//
// # Snapshots, not shared state
//
// The sampler owns a *profile.Profile and is the only goroutine that
// writes to it. The UI never reads that profile: it polls a Source, on a
// Bubble Tea command goroutine, once per refresh interval (500ms by
// default), and gets back a Status holding a Snapshot of the profile. A
// snapshot shares the profile's interned stacks and events up to the
// moment it was taken (the sampler only appends past them), so taking one
// costs a copy of the thread table, and afterwards the UI may take as long
// as it likes to aggregate and draw without holding any lock the sampler
// needs. Rendering can therefore never delay a sample, and thus never
// lengthens the time the target stays stopped; a slow terminal only makes
// the UI refresh less often. Only one poll is in flight at a time, so a
// Source that is slow to answer delays frames instead of piling up.
//
// # Model
//
// The model keeps the newest Status and the one shown (the same one unless
// paused), the poll's clock, and the user's settings: view, sort column,
// window or cumulative mode, a reset offset, a filter, the tree's fold
// state, and the thread in focus (Enter on the threads view: the tree and
// the functions then count that thread's samples only). Functions sort by
// self unless Options.SortByTotal. Whenever the shown snapshot or a
// setting changes, Update aggregates the window once (profile.Aggregate,
// Functions, Tree) and keeps the rows; View is a pure function of the
// model that only formats them, with no I/O and no clock, which is what
// lets the tests drive the model with synthetic messages and check its
// output.
//
// The window is the last Options.Window of samples, ending at the newest
// sample (not the wall clock), so a paused or exited target keeps its last
// data on screen. Reset cannot clear the sampler's profile; it records the
// newest sample's time and aggregates from there. Fold state and the tree
// cursor are keyed by the path of names from the root, because every
// refresh builds new nodes.
//
// # Lifecycle and failure
//
// Run starts a Bubble Tea program on the alternate screen and returns when
// the user quits, when its context is done (the CLI cancels it on SIGTERM
// or when the target exits and it wants out) or when the UI fails; the
// terminal is restored in every case and the caller then detaches from the
// target. Bubble Tea v1 recovers panics by itself, but prints them and
// returns only ErrProgramPanic; the model catches them first (in Update,
// View and its polling command), records value and stack, quits the
// program normally and Run returns them as a *PanicError.
package tui
