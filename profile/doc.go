// Package profile aggregates symbolised stack samples.
//
// A Profile is the sampler's accumulator: the sampler Adds one Sample per
// thread stack it took, and the outputs read it: record writes it to files
// (package export), top renders windows of it. Stacks are interned, so a
// profile of a long recording costs one small Event per sample plus one copy
// of each distinct stack; a thread that did not run between ticks (Repeat)
// extends its last Event instead, so under --idle a thousand sleeping
// threads cost a thousand Events per RunLimit, not per tick.
//
// Lifecycle: New, then Add (and SetFrames, which completes a stack added
// before its line tables were ready) from one goroutine (the sampler). Readers on other
// goroutines never touch a live Profile: they take a Snapshot, an immutable
// copy, and aggregate it (Aggregate, Functions, Tree, Threads). This is what
// lets the terminal UI render without locks and without ever blocking the
// sampler.
//
// Stacks are leaf first, as in pprof: Frames[0] is the innermost frame.
package profile
