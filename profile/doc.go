// Package profile aggregates symbolised stack samples.
//
// A Profile is the sampler's accumulator: the sampler Adds one Sample per
// thread stack it took, and the outputs read it: record writes it to files
// (package export), top renders windows of it. Stacks are interned, so a
// profile of a long recording costs one small Event per sample plus one copy
// of each distinct stack; a thread that did not run between ticks (Repeat)
// extends its last Event instead, so under --idle a thousand sleeping
// threads cost a thousand Events per RunLimit, not per tick. A profile told
// to KeepTimeline(d) folds events older than d into per-thread, per-stack
// sums (Folded), so a long recording's memory stops growing with its
// length; totals stay exact, and Aggregate.Minus gives "since an earlier
// snapshot" exactly.
//
// Lifecycle: New, then Add (and SetFrames, which completes a stack added
// before its line tables were ready) from one goroutine (the sampler). Readers on other
// goroutines never touch a live Profile: they take a Snapshot, an immutable
// copy, and aggregate it (Aggregate, Functions, Tree, Threads). This is what
// lets the terminal UI render without locks and without ever blocking the
// sampler.
//
// A Merger joins the snapshots of several processes' profiles into one
// (record and top with several -p): each Thread keeps its process in PID.
// Successive merges of the same processes keep stable stack ids, so an
// earlier merge's Aggregate subtracts from a later one. Every copy that
// re-numbers or drops stacks or threads (Merger.Merge, SelectThreads,
// export's ThreadRooted) treats Folded like Events.
//
// A frame's name is made here, once for every output: Frame.Name (the
// function, or module+0xoff) is what profiles, flame graphs and top group
// by; Frame.Label adds the offset into the function for stack listings
// (dump); ModuleBase is a module's file name as both show it.
// SelectThreads keeps some threads of a snapshot (--thread-name).
//
// Stacks are leaf first, as in pprof: Frames[0] is the innermost frame.
package profile
