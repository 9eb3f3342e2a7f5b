// Package engine aggregates the samples of any back end into a profile: it
// is what record and top run, over ptrace today and perf_event next.
//
//	backend.Source -> resolve.Resolver (walk, names) -> profile.Profile
//
// Lifecycle: New takes a back end's Source and a Resolver of the same
// process (the caller opens both, and closes both after Run); Run drives
// the Source from one goroutine until its context ends, Options.Duration
// passes or the process exits; Snapshot and Stats may be called from any
// other goroutine meanwhile (live, fleet and the progress line do).
//
// Per sample, inside the back end's yield (for ptrace: on Run's goroutine,
// right after the thread resumed, while the tracer thread goes on
// resuming other threads' signal stops), the engine resolves the stack;
// at the end of each round it adds the round's samples to the profile
// under its lock, so a snapshot never shows half a tick. An Unchanged
// sample (a wall-clock back end's thread that did not run) repeats the
// thread's last stack without resolving anything. A sample's Weight is
// counted in periods of Options.Period.
//
// Exec: after a round with Round.Exec the engine reloads the resolver's
// address space, names the profile's command again and forgets the
// threads' last stacks. Samples are named as they are yielded, so a back
// end ends a round at an exec, before any sample of the new program
// (ptracesampler returns such a round with no samples at all).
//
// Lines: a stack added before its lines were ready (AsyncLines) is named
// again (resolve.Resolver.Rename) when they are, at a later round or, at
// the latest, before Run returns; so file:line and inlined frames do not
// depend on when a stack was sampled. Run's end waits at most lateWait
// (2 s) for them, with no thread stopped, and an exec not at all: stacks
// still pending then keep their frames without lines.
//
// Stats are the back end's counters summed (Round: missed ticks, failed,
// gone, not taken, lost) and the engine's own (samples, reused, pause
// histograms from Sample.Pause and Sample.Total, tick work).
package engine
