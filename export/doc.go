// Package export writes a profile.Profile in the formats people already open:
// pprof (go tool pprof, pprof.me, Grafana), folded stacks (flamegraph.pl,
// inferno, speedscope), speedscope JSON (one profile per thread) and a
// self-contained interactive flame graph SVG.
//
// Writers read a snapshot and never modify it; they may run while the
// sampler goes on (record writes on Ctrl-C with what it has). Options
// apply to every format: Threads roots each thread's stacks at a frame
// "NAME TID" (ThreadRooted, a copy of the profile), Lines names folded
// frames by line.
//
// The flame graph's script runs in the browser that opens the file, with
// no other file and no network: it waits for the document's load event
// (the frames come after it in the file), then handles hover, zoom and
// search on the frames' data-s/data-n/data-d attributes (sample units).
// TestFlameGraphInChromium drives it in headless Chromium.
package export
