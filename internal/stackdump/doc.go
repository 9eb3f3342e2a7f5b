// Package stackdump is `stacktop dump`: one-shot stacks of every thread of a
// process, as pstack, gdb's `thread apply all bt` and eu-stack print them,
// with the pause each thread suffered.
//
// Run attaches with the ptrace back end's one-shot form
// (ptracesampler.OpenDump), walks each thread's stack inside the sampling
// batch and names the frames after it (internal/resolve), detaches what is
// still attached, and returns a Result that WriteText and WriteJSON print.
// By default each thread is stopped only while its registers and stack are
// copied (its used stack, when it runs on a thread stack: frames larger
// than the window are walked from the copy, ThreadStack.StackMissed says
// if not), and detached right at that stop;
// Options.Freeze stops them all for one consistent snapshot (for deadlock
// analysis), at the price of one longer pause.
package stackdump
