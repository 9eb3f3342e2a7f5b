// Package fleet sends a running recording to profiling backends, every
// interval, for continuous profiling across many hosts: OTLP (package
// export/otlp) and Grafana Pyroscope's /ingest.
//
// # Lifecycle
//
// New takes the engine (a Source: anything with Snapshot) and the sinks;
// Run cuts a window every Interval until its context ends, and Close cuts
// the last window, gives the sinks a bounded time to send what they hold,
// and stops them. Stats may be read at any time.
//
// # Windows
//
// A window is the samples added since the previous cut, built as a
// profile.Profile of its own (its Start is the window's start, its
// samples are stamped at the window's end), so every writer of package
// export and package otlp works on it unchanged. It is computed from two
// snapshots' per-thread, per-stack totals, so the windows of a run add up
// exactly to the whole run's profile.
//
// # Never slowing the sampler
//
// The engine's goroutine does nothing for uploads: the cutter takes a
// snapshot (the engine's lock is held only for the copy Snapshot makes)
// and every encoding and network round trip runs on the sinks' own
// goroutines.
//
// # Endpoints that are down
//
// Each sink has a bounded queue (MaxQueued windows, the one being sent
// included). A send that fails with a retryable error (the endpoint is
// unreachable, overloaded, or timed out) is retried with exponential
// back-off and jitter; while it waits, new windows queue up, and when the
// queue is full the oldest waiting window is dropped and counted. A
// rejected window (not retryable) is dropped and counted too. One line on
// the log says when a sink goes down and one when it is back; the counts
// go in record's summary. Memory held for a sink that is down is thus at
// most MaxQueued windows, whatever the outage's length.
package fleet
