package ptracesampler

import "math"

// runLedger proves that threads the back end did not read at a tick did not
// run, with two readings of the process CPU clock instead of one schedstat
// read per thread.
//
// # Why
//
// An on-CPU profile samples, at every tick, the threads that ran since the
// previous one. With a thousand threads at 99 Hz, reading every thread's
// schedstat was most of stacktop's CPU. The back-off (maxCheckInterval)
// reads idle threads less often, but still about 60 of them a tick, and a
// thread that wakes is noticed only at its next reading. The process CPU
// clock (procmaps.ProcessClock) is the sum of every thread's run time in
// one system call.
//
// # The proof
//
// The ledger keeps seen, the sum over every thread the back end ever read of
// its last reading; X = clock - seen is what ran that the back end has not
// read yet. At each tick the back end reads the threads that ran at their
// previous reading (and new threads) between two readings of the clock,
// the window (threads read at the previous tick: those that ran lately).
// When both readings are equal, no thread was accounted in
// between (runs only add), so the clock and every reading in the window
// describe one instant. From one such window to the next, X then grows by
// exactly what ran in between on threads the second window did not read,
// including threads that exited or were never listed: every thread the
// window reads was read at the previous tick too. Reading a thread after
// the window (an idle thread due on the back-off schedule) moves seen by
// what it ran until then, which the next comparison counts as well. So an
// unchanged X proves that no thread outside the window ran: the tick is
// quiet.
//
// A thread read at tick r has not run since if every tick after r was
// quiet; knownIdle tells, and the back end skips its reading. At a tick that
// is not quiet, idle threads due on the back-off schedule are read as
// before, so the ledger never makes the back end read more than the back-off
// alone, and never later.
//
// One idle thread's wake-up breaks that chain for every thread. So the
// ledger also remembers base, X at a quiet tick when every thread had been
// read since the chain began (all readings exact). X is base plus what ran
// unread since, all of it non-negative; X == base at a later window proves
// every reading exact again, as soon as the thread that woke was read on
// its schedule, not after every thread was. A thread that exits takes what
// it ran unread with it into the clock, which voids base until the chain
// proves a new one.
//
// What keeps a tick from being quiet: a window whose two clock readings
// differ on every try (a thread was accounted inside it; at about 2,000
// accountings a second that is a few percent of windows), a new thread (its
// first reading adds to seen what it ran before it was listed, which could
// cancel another thread's run; so could a window thread that could not be
// read), and a previous window that was not proven.
type runLedger struct {
	clock func() (uint64, error) // the process CPU clock (runSource.process)
	// off: prove nothing. The clock is unreadable, or some thread has no
	// schedstat file (its stand-in counts clock ticks, not nanoseconds).
	off        bool
	seen       uint64 // modular: only differences matter
	now        uint64 // the clock in this tick's window
	consistent bool   // this tick's window held still
	prev       uint64 // X after the previous tick's readings
	prevOK     bool   // prev was taken at a window that held still
	quiet      bool   // this tick's verdict
	quietSince int64  // threads read since quietSince-1 are exact when quiet
	// Completeness: base is X when every thread's last reading was
	// exact, so X == base proves that again, whatever happened since.
	// stale counts the threads that may not be exact (read before
	// quietSince-1); base is taken when it reaches 0 at a quiet tick.
	base   uint64
	baseOK bool
	stale  int
}

// windowTries is how often a window whose clock moved is read again. Each
// try repeats the window's reads (a few threads), and three misses in a
// row are rare enough.
const windowTries = 3

// window calls read, which reads the window's threads, between two
// readings of the clock; again if they differ, when retry allows (a big
// window, like the first tick's reading of every thread, is tried once).
// read must be repeatable: only its last readings count.
func (l *runLedger) window(retry bool, read func()) {
	l.consistent = false
	if l.off {
		read()
		return
	}
	tries := 1
	if retry {
		tries = windowTries
	}
	for range tries {
		before, err := l.clock()
		if err != nil {
			l.off = true
			read()
			return
		}
		read()
		after, err := l.clock()
		if err != nil {
			l.off = true
			return
		}
		if before == after {
			l.now, l.consistent = after, true
			return
		}
	}
}

// record notes that a thread's reading moved from old to cur (old is 0 for
// a thread's first reading).
func (l *runLedger) record(old, cur uint64) {
	l.seen += cur - old
}

// verdict decides whether tick is quiet, once the window's readings are
// recorded. unsure tells that the window read new threads, or failed to
// read one (its last reading then is older than the previous tick).
// threads is how many the back end tracks, fresh how many of them it read
// at this tick so far (the window's).
func (l *runLedger) verdict(tick int64, unsure bool, threads, fresh int) bool {
	x := l.now - l.seen
	if l.consistent && !l.off && l.baseOK && x == l.base {
		// Every thread's last reading is exact: whatever ran was read.
		l.quiet, l.quietSince, l.stale = true, math.MinInt64+1, 0
		return true
	}
	l.quiet = l.consistent && l.prevOK && !unsure && x == l.prev
	if l.quiet && l.stale == 0 {
		l.base, l.baseOK = x, true
	}
	if !l.quiet {
		l.quietSince = tick + 1
		l.stale = threads - fresh
	}
	return l.quiet
}

// reread notes the reading of a thread last read at readTick (not one of
// the window's).
func (l *runLedger) reread(readTick int64) {
	if readTick < l.quietSince-1 {
		l.stale--
	}
}

// forget notes that a thread last read at readTick is gone. What it ran
// since is in the clock for good, so base no longer proves anything.
func (l *runLedger) forget(readTick int64) {
	l.reread(readTick)
	l.baseOK = false
}

// knownIdle reports whether a thread last read at tick readTick cannot
// have run since: this tick and all since readTick were quiet.
func (l *runLedger) knownIdle(readTick int64) bool {
	return l.quiet && readTick >= l.quietSince-1
}

// stillBut reports whether, since this tick's window, the process ran
// exactly ran nanoseconds: what the caller's own readings account for, so
// no other thread was accounted (none left a CPU, none entered a stop).
func (l *runLedger) stillBut(ran uint64) bool {
	if !l.consistent || l.off {
		return false
	}
	now, err := l.clock()
	return err == nil && now-l.now == ran
}

// settle ends the tick, once every reading of it is recorded.
func (l *runLedger) settle() {
	l.prev, l.prevOK = l.now-l.seen, l.consistent
}
