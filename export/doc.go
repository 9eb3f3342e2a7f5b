// Package export writes a profile.Profile in the formats people already open:
// pprof (go tool pprof, pprof.me, Grafana), folded stacks (flamegraph.pl,
// inferno, speedscope), speedscope JSON (one profile per thread) and a
// self-contained interactive flame graph SVG.
//
// Writers read a snapshot and never modify it; they may run while the
// sampler goes on (record writes on Ctrl-C with what it has).
package export
