// Package perfevent is stacktop's perf_event back end: the kernel copies a
// thread's user registers and the top of its user stack into a ring buffer
// at a timer interrupt, and no thread is ever stopped. It implements
// backend.Source; everything above (unwinding with SFrame, CFI, frame
// pointers; naming; profiles) is the same as for ptrace.
//
// # Event
//
// One software cpu-clock event (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK:
// an hrtimer, so it works in VMs without a PMU) in period mode: the period
// is 1/Rate seconds of the thread's own CPU time, and each sample's period
// is its Weight. It asks for PERF_SAMPLE_TID | TIME | CPU | PERIOD |
// REGS_USER | STACK_USER, with sample_regs_user from the architecture's
// RegsLayout (the kernel's perf_regs numbering, mapped to DWARF numbers in
// regs.Set; x86-64, arm64 and s390x) and sample_stack_user = the window
// (Options.Window, a multiple of 8 up to MaxWindow: a record's size is a
// 16-bit field). CPU time a thread spends in the kernel (system calls,
// page faults) is sampled where the kernel allows it (CAP_PERFMON, or
// perf_event_paranoid below 2): such a sample carries the user registers
// and stack as they were at kernel entry, so the time is charged to the
// user code that made the call, as the ptrace back end's CPU-time weights
// do. Where the kernel refuses, Open sets exclude_kernel (what
// perf_event_paranoid 2 allows), the profile is of user time only, and
// Stats.KernelExcluded says so.
// The kernel copies the stack in the interrupt and cannot fault pages in:
// the copy (Sample.Stack) ends early at unmapped memory and also at a
// stack page that is not resident (swapped out, or never touched near the
// top of the main thread's stack); a resolver may read what lies above
// from the live process (unwind.StackWindow.Fallback) or report the walk
// truncated.
// TIME is CLOCK_MONOTONIC (use_clockid), converted to wall time with an
// offset taken at Open. mmap2, comm, comm_exec, task and sample_id_all ask
// for the side-band records below.
//
// # Per-CPU rings, inherited events
//
// Each thread of the process gets one event per online CPU (pid = TID, cpu
// = N, inherit), and all events of CPU N write into one ring buffer
// (PERF_EVENT_IOC_SET_OUTPUT to the first event of that CPU, which is the
// one mapped). Per-thread rings (cpu = -1) would be simpler but cannot
// follow new threads: the kernel refuses to map an inherited per-task
// event, and rings of different threads cannot be shared, so each new
// thread would need its own ring opened after the fact from a /proc scan,
// and short-lived threads would be missed. With per-CPU events a thread
// created later inherits its creator's events inside clone(), before it
// runs an instruction, at no cost in file descriptors, and memory is one
// ring per CPU whatever the thread count. The cost: threads-at-start x CPUs
// file descriptors (Go raises RLIMIT_NOFILE's soft limit to the hard one at
// start), and records of one round come from several rings, so Next sorts
// them by time before yielding.
//
// A thread that appears in /proc/PID/task without an inherited event (it
// was created between the listing and its creator's open) is opened at the
// next round; PERF_RECORD_FORK records mark the inherited ones so none is
// opened twice. A thread whose events cannot be opened (too many open
// files) counts once in Round.Failed and is tried again once a second,
// not at every round. Exited threads' events are closed at the next round (a
// ring's owning event stays open with the ring; once its thread is gone
// Next polls another event that writes into the ring for the watermark).
// At an exec every event of
// the old program's threads is closed (the ring owners are disabled, with
// what their threads' children inherited) and the next round opens events
// on the new program's threads: an execve from a thread other than the main
// one hands that thread the PID, and its events, filed under its old TID,
// would otherwise be closed as an exited thread's. Only threads inherit
// the events (inherit_thread, Linux 5.13), not children forked by the
// process, as the ptrace back end does not follow children either; an
// older kernel refuses the bit and the children inherit them too, their
// samples filling the rings only to be dropped (Stats.OtherProcs).
//
// # Reading a ring
//
// The kernel produces at data_head and publishes it with a store-release;
// the consumer loads data_head with acquire semantics, reads the records
// before it, and only then stores data_tail (release), which hands the
// space back. Ring does exactly this with sync/atomic (sequentially
// consistent, so at least acquire/release). A record that straddles the
// end of the data area is copied into a scratch buffer; all others are
// parsed in place, and a Sample's Stack points into the mapped ring until
// the round's tails are released, after every yield. Corrupt data (a size
// below a header or past the head, a head more than a ring ahead) is a
// *FormatError with its ring position; the ring skips to the head and
// reading goes on. Parsers of these bytes (ParseRecord, Ring) have fuzz
// targets.
//
// # Side-band records
//
//   - PERF_RECORD_LOST (and LOST_SAMPLES): counted into Round.Lost.
//   - PERF_RECORD_MMAP2 of executable memory, and an exec: the next sample
//     yielded has Sample.MapsChanged set, so a resolver re-reads
//     /proc/PID/maps before unwinding it (a library dlopen()ed during the
//     run is then found).
//   - PERF_RECORD_COMM with the exec flag: Round.Exec, and the round ends
//     there, before any sample of the new program (the engine names
//     samples as they are yielded and reloads the address space after a
//     round with Exec). The records after it are copied out of the rings
//     and handled first by the next call, which does not wait. Samples
//     taken before the exec in the same round are dropped (Round.Failed,
//     their address space is gone).
//   - PERF_RECORD_FORK/EXIT: thread bookkeeping (above); THROTTLE counts
//     into Stats.Throttled (the kernel lowered the rate: perf_event_max_sample_rate).
//
// # Lifecycle
//
// Open lists the threads, opens every event (enabled at once), maps one
// ring per CPU and opens a pidfd for the process; on any failure it closes
// what it opened. Next waits (poll on the rings' watermark of half a ring
// and on the pidfd, in slices of 20 ms to see ctx) for at most
// Options.Interval, drains every ring, yields the samples in time order,
// releases the rings, then opens events for threads that need them.
// Once the pidfd reports the exit it drains what is left and returns
// backend.ErrExited. Close disables and closes every event, unmaps the
// rings and closes the pidfd, on every path; it is safe to call twice.
// The target is never stopped, so it is left as it was found.
//
// # What a sample costs the sampled thread
//
// Everything the kernel does for a sample happens in the timer interrupt
// on the thread's CPU: the cpu-clock hrtimer fires, the record is
// reserved in the ring (shared by the CPU's events, lock-free), the
// fields are written (TID, TIME from the monotonic fast clock, CPU,
// PERIOD: a few stores; 17 registers on x86-64), the window is copied
// from the user stack, and the timer is armed again. The side-band bits
// (mmap, comm, task) cost only when the process maps, names or clones;
// inherit costs at clone(); the events of other CPUs are not scheduled
// while the thread runs elsewhere. The reader is woken per half ring
// (watermark), not per sample: in a 3 s run at 999 Hz the thread's CPU
// took 23 IRQ-work interrupts with this back end against 96 with perf
// record --call-graph dwarf, and Next's 20 ms poll slices run on
// stacktop's own CPU. So a sample costs one timer interrupt plus the copy.
//
// On a VM the interrupt dominates: a guest's timer interrupt and the
// re-arming of its TSC deadline exit to the host. bench/perf-backends.sh
// (FLOOR=1) measured on this project's 2-core VM, in three runs, as
// time the thread lost in interrupts per sample at 999 Hz: perf record
// with no call graph 11.7-13 µs (1.2-1.3% of the thread's time), with the
// user registers 14-15 µs, with dwarf,8192 (perf's default) 16.3-17.9 µs;
// this back end with a window of 4, 8, 16 and 32 KiB 13-15.7, 11.5-15.3,
// 15-16.5 and 18-19 µs (the kernel's own tick, for comparison, 18-20 µs).
// The bare cpu-clock sample is the floor: no choice of event
// attributes gets under it, and issue 17's 0.5% at 999 Hz is below it
// here. On bare metal an interrupt takes a microsecond or two.
//
// The window is the one cost stacktop chooses: the kernel copies the
// whole window whenever the stack above SP is resident (a thread deep in
// its calls), 0.1-0.3 µs per KiB above 8 KiB here. A walk uses far
// less: on the test targets every walk needed at most 6.3 KiB (a signal
// frame on the stack the most) or else more than 64 KiB, which no window
// holds (the resolver reads those frames from the live process). So
// DefaultWindow is 8 KiB, perf's default too, and not the ptrace back
// end's 16 KiB: --stack-window given on the command line still wins.
//
// # --idle
//
// cpu-clock counts only while a thread runs, so this back end samples
// on-CPU time only. A wall-clock profile (--idle) needs the stacks of
// threads that are not running, which only the ptrace back end can take:
// Open refuses Options.Idle with ErrIdle.
//
// # Refusals
//
// When the kernel refuses (perf_event_paranoid, no CAP_PERFMON, another
// user's process, a seccomp profile or LSM, no perf events at all, or ring
// memory over perf_event_mlock_kb) Open returns a *RefusedError whose
// message says which and what to do; record and top exit with a code of
// their own for it (docs/record.md, docs/top.md).
package perfevent
