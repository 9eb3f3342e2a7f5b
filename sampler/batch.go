package sampler

import (
	"stacktop/procmaps"
	"stacktop/ptrace"
	"stacktop/unwind"
)

// StackEach samples the threads tids in one batch and calls fn with each
// thread's stack (or the error that kept it from being sampled: an exited
// thread gives ptrace.ErrThreadExited). The batch runs on the tracer thread
// (ptrace.Process.SampleEach), so a dump of a thousand threads pays one
// hand-off between goroutines, not a thousand; each thread is still
// stopped only while its registers and stack window are copied, and is
// resumed before its stack is unwound. Names and states are read from /proc
// before the batch, so they describe the threads as they were, not in
// their ptrace stop. fn must not call back into t.
func (t *Target) StackEach(tids []int, fn func(ts ThreadStack, err error)) error {
	infos := make([]procmaps.ThreadInfo, len(tids))
	for i, tid := range tids {
		infos[i], _ = procmaps.ReadThreadInfo(t.PID, tid)
		if infos[i].State == 't' && t.proc.JobStopped(tid) {
			infos[i].State = 'T' // what it is without stacktop: stopped by a signal
		}
	}
	// Only the walk runs inside the batch; naming the frames waits until
	// every thread was sampled, so loading symbols and debug info (see
	// PrefetchSymbols) overlaps with sampling instead of holding it up.
	type walked struct {
		ts  ThreadStack
		st  unwind.Stack
		err error
	}
	out := make([]walked, len(tids))
	done := make([]bool, len(tids))
	err := t.proc.SampleEach(tids, t.opts.StackWindow, func(i int, s *ptrace.Sample, err error) bool {
		w := walked{ts: ThreadStack{TID: tids[i], Name: infos[i].Name, State: stateString(infos[i].State)}, err: err}
		if err == nil {
			t.setSample(s) // shares s.Stack until the next thread: walked before that
			w.ts.Stopped, w.ts.Total = s.Stopped, s.Total
			st := t.res.Walk(&t.sample)
			w.st = st
			w.st.Frames = append([]unwind.Frame(nil), st.Frames...)
		}
		out[i], done[i] = w, true
		return true
	})
	for i, w := range out {
		if !done[i] {
			continue // the batch ended early (the process exited)
		}
		if w.err == nil {
			st := t.res.Name(w.st)
			w.ts.Frames, w.ts.Complete, w.ts.Err = st.Frames, st.Complete, st.Err
		}
		fn(w.ts, w.err)
	}
	return err
}

// stackEach is StackEach without the /proc reads (the periodic engine keeps
// names itself): fn gets the index in tids of each thread, in the order
// the threads stopped. A batch ends early when the process exited; the
// error is then passed to fn. A thread that did not stop before
// o.Deadline (or o.Cancel) gets ptrace.ErrNotTaken. o.StackWindow is set
// here.
func (t *Target) stackEach(tids []int, o ptrace.BatchOptions, fn func(i int, ts ThreadStack, err error)) error {
	o.StackWindow = t.opts.StackWindow
	return t.proc.SampleBatch(tids, o, func(i int, s *ptrace.Sample, err error) bool {
		ts := ThreadStack{TID: tids[i]}
		if err != nil {
			fn(i, ts, err)
			return true
		}
		t.setSample(s) // shares s.Stack until the next thread: unwound before that
		ts.Stopped, ts.Total = s.Stopped, s.Total
		t.unwind(&ts)
		fn(i, ts, nil)
		return true
	})
}

func stateString(b byte) string {
	if b == 0 {
		return ""
	}
	return string(b)
}
