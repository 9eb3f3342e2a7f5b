// Package gort knows the little of a Go program's runtime the unwinder needs
// to follow Go's own stack switches, as Go's traceback (and so `go tool
// pprof`) does: a thread running on its system stack (g0) inside
// runtime.systemstack, or in runtime.newstack called by runtime.morestack,
// belongs to the goroutine m.curg, whose saved context (g.sched) says where
// the goroutine's own stack continues. A thread in runtime.mcall's function
// (park_m, gosched_m...) continues at mcall's caller (gopark...) on the
// goroutine's stack too: m.curg's, or, once park_m dropped m.curg,
// m.lockedg's, a goroutine locked to the thread, which only it can resume
// (Go's traceback stops at mcall; the goroutine's own traceback, in a
// goroutine profile or a SIGQUIT dump, shows those frames). An unlocked
// goroutine m.curg no longer names may run elsewhere: the walk ends there.
//
// Lifecycle: Load reads, once per executable, the addresses of
// runtime.systemstack, runtime.morestack and runtime.mcall from the symbol table, the
// offsets of the fields of runtime.g, runtime.m, runtime.gobuf and
// runtime.stack from the DWARF types, and where the thread's g lives (the
// TLS slot on amd64). Layout.Switcher(bias) is then an
// unwind.StackSwitcher for one process that maps the executable at bias.
// A Layout is read-only after Load and safe to share.
//
// Without DWARF (a binary linked with -ldflags=-w or stripped) Load fails
// with ErrNoDWARF and the switch is off: the walk stops at (or is confused
// by) the system stack's top as before. The field offsets change between
// Go releases (runtime.m most of all), so guessing them from a table per
// version would silently read the wrong words; the walker instead trusts
// only what the binary says about itself.
//
// amd64 and arm64 are followed. On amd64 the thread's g is read from its
// TLS slot (regs.Set.TLS, fs_base, minus 8 for the Go linker's own TLS, or
// runtime.tlsg's place in PT_TLS for an externally linked program); on
// arm64 from x28 of frame 0, Go's g register (its TLS slot is written only
// with cgo). arm64's morestack keeps f's caller's return address in
// sched.lr (f's prologue moved it to R3). s390x (g in r13) is not followed.
package gort
