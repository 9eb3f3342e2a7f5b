package sampler

import (
	"stacktop/procmaps"
	"stacktop/ptrace"
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
	}
	i := 0
	return t.proc.SampleEach(tids, t.opts.StackWindow, func(s *ptrace.Sample, err error) bool {
		ts := ThreadStack{TID: tids[i], Name: infos[i].Name, State: stateString(infos[i].State)}
		i++
		if err != nil {
			fn(ts, err)
			return true
		}
		t.sample = *s // shares s.Stack until the next thread: unwound before that
		ts.Stopped, ts.Total = s.Stopped, s.Total
		t.unwind(&ts)
		fn(ts, nil)
		return true
	})
}

func stateString(b byte) string {
	if b == 0 {
		return ""
	}
	return string(b)
}
