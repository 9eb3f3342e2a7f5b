package perfevent

// A round of Next: waiting for the rings or the interval, following the
// process's threads (events opened for new ones, closed for gone ones),
// and dropping the events of an image an exec replaced.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// Next waits until a ring is half full or Options.Interval has passed since
// the previous round, then yields every sample the kernel wrote, ordered
// by time across CPUs. A round ends at an exec of the process: it returns
// with Round.Exec before any sample of the new program, and the next call
// yields the records after the exec at once, without waiting. When ctx
// ends it still yields what the rings hold, then returns ctx.Err().
func (s *Source) Next(ctx context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	var round backend.Round
	if s.closed {
		return round, errors.New("perfevent: Next after Close")
	}
	var exited bool
	var err error
	if len(s.carry) == 0 {
		exited, err = s.wait(ctx)
		if err != nil && ctx.Err() == nil {
			return round, err
		}
	}
	s.lastRound = time.Now()
	if err != nil {
		// ctx ended (Ctrl-C, --duration): what the kernel wrote since
		// the previous round is still yielded, so the last interval is
		// not lost.
		if s.drain(&round, yield) {
			// Ended at an exec: the rest is the next call's.
			s.dropOldImage()
			return round, nil
		}
		return round, err
	}
	// List the threads before draining: a thread the kernel created with
	// an inherited event has written its FORK record by the time the
	// rings are drained, so it is not opened twice.
	tids, terr := procmaps.Threads(s.pid)
	execed := s.drain(&round, yield)
	if execed {
		s.dropOldImage()
		if terr == nil && !exited {
			// The listing may predate the exec.
			tids, terr = procmaps.Threads(s.pid)
		}
	}
	if terr != nil || exited {
		if execed {
			// The records after the exec come first; the next call,
			// which does not wait, then finds the process gone.
			return round, nil
		}
		return round, backend.ErrExited
	}
	live := make(map[int]bool, len(tids))
	now := time.Now()
	for _, tid := range tids {
		live[tid] = true
		if s.covered[tid] {
			continue
		}
		retry, failedBefore := s.failed[tid]
		if failedBefore && now.Before(retry) {
			continue
		}
		if err := s.openThread(tid); err != nil {
			if !failedBefore {
				round.Failed++
				round.Err = err
			}
			s.failed[tid] = now.Add(openRetry)
			continue
		}
		delete(s.failed, tid)
	}
	for tid := range s.failed {
		if !live[tid] || s.covered[tid] {
			delete(s.failed, tid)
		}
	}
	for tid, fds := range s.opened {
		if !live[tid] {
			s.closeEvents(fds)
			delete(s.opened, tid)
		}
	}
	for tid := range s.covered {
		if !live[tid] {
			delete(s.covered, tid)
		}
	}
	s.choosePollFds()
	round.Threads = len(tids)
	return round, nil
}

// dropOldImage disables and closes the events of the program an exec
// replaced, so the loop after it opens events on every thread of the new
// one. An execve from a thread other than the main one gives that thread
// the PID: its events, opened (or inherited) under its old TID, would be
// closed as those of an exited thread while the PID stayed marked covered,
// leaving the new program without events. Events inherited from the ring
// owners are disabled with them (PERF_EVENT_IOC_DISABLE reaches inherited
// children), else a thread that survived the exec would be sampled twice;
// the owners' fds stay open with the mapped rings, which the new events
// write into.
func (s *Source) dropOldImage() {
	for tid, fds := range s.opened {
		s.closeEvents(fds)
		delete(s.opened, tid)
	}
	clear(s.covered)
	clear(s.failed)
	for _, r := range s.rings {
		if r != nil && !r.retired {
			unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
			r.retired = true
		}
	}
}

// closeEvents disables and closes events of s.opened. A ring polled through
// one of them is polled through its owner again (which may report the hup
// at once; choosePollFds then finds another).
func (s *Source) closeEvents(fds []int) {
	for _, fd := range fds {
		if i, ok := s.ringOf[fd]; ok {
			if r := s.rings[i]; r != nil && r.pollFd == fd {
				r.pollFd, r.hup = r.fd, false
			}
			delete(s.ringOf, fd)
		}
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
		unix.Close(fd)
	}
}

// choosePollFds gives a ring whose polled event's thread has exited (the
// owner's, typically the main thread's: after an execve from another
// thread it always is) another event writing into it, so the half-ring
// watermark wakes Next again instead of the ring overflowing until the
// interval ends.
func (s *Source) choosePollFds() {
	for _, fds := range s.opened {
		for _, fd := range fds {
			if r := s.rings[s.ringOf[fd]]; r != nil && r.hup && fd != r.pollFd {
				r.pollFd, r.hup = fd, false
			}
		}
	}
}

// openRetry is how often a thread whose events could not be opened is tried
// again: the cause (too many open files, mostly) rarely goes away soon.
const openRetry = time.Second

// wait blocks until a ring passes its watermark, the interval ends, the
// process exits (true) or ctx is done.
func (s *Source) wait(ctx context.Context) (bool, error) {
	deadline := s.lastRound.Add(s.opt.Interval)
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		// Poll in slices so a cancelled ctx is seen within 20 ms.
		ms := int(min(left, 20*time.Millisecond) / time.Millisecond)
		s.pollFds = s.pollFds[:0]
		s.pollFds = append(s.pollFds, unix.PollFd{Fd: int32(s.pidfd), Events: unix.POLLIN})
		for _, r := range s.rings {
			if r != nil && !r.hup {
				s.pollFds = append(s.pollFds, unix.PollFd{Fd: int32(r.pollFd), Events: unix.POLLIN})
			}
		}
		n, err := unix.Poll(s.pollFds, max(ms, 1))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("perfevent: poll: %w", err)
		}
		if n == 0 {
			continue
		}
		if s.pollFds[0].Revents != 0 {
			return true, nil
		}
		ready := false
		for _, p := range s.pollFds[1:] {
			if p.Revents&unix.POLLHUP != 0 {
				for _, r := range s.rings {
					if r != nil && r.pollFd == int(p.Fd) {
						r.hup = true
					}
				}
			}
			if p.Revents&unix.POLLIN != 0 {
				ready = true
			}
		}
		if ready {
			return false, nil
		}
	}
}
