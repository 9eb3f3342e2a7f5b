// Package targets runs the C test programs in testdata/targets (chains,
// manythreads, exiter) for stacktop's integration tests and benchmarks.
//
// The binaries are prebuilt and committed under testdata/targets/bin, one
// file per variant: NAME-sframe1, NAME-sframe2, NAME-sframe3 (built with
// -fomit-frame-pointer and SFrame V1, V2, V3) and NAME-fp (frame pointers,
// no .sframe). scripts/build-targets.sh rebuilds them.
//
// Lifecycle: Start launches a target, waits for the "ready" line it prints
// once every thread is parked in its known call chain, and registers a
// t.Cleanup that kills it. While it runs, Progress reads the counter the
// target rewrites every 10 ms (proof that it keeps running), Stop puts the
// whole thread group into group-stop with SIGSTOP and returns once every
// thread shows state T, and Cont resumes it.
//
// The call chain each thread of a target is parked in is documented at the
// top of its C source; Threads maps thread ids to the names (comm) the
// targets give their threads, so a test can pick "the recursion thread".
package targets
