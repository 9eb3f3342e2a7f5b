// Package stackdump is `stacktop dump`: one-shot stacks of every thread of a
// process, as pstack, gdb's `thread apply all bt` and eu-stack print them,
// with the pause each thread suffered.
//
// Run attaches (sampler.Open), takes each thread's stack, detaches, and
// returns a Result that WriteText and WriteJSON print. By default each
// thread is stopped only while its registers and stack window are copied;
// Options.Freeze stops them all for one consistent snapshot (for deadlock
// analysis), at the price of one longer pause.
package stackdump
