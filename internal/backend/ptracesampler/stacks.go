package ptracesampler

import (
	"sort"
	"strings"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// Frames larger than the stack window.
//
// The stack window (--stack-window) is a hint for the common case, not a
// wall: a walk that needs more of a thread's stack than was copied while
// the thread was stopped reads the rest from the live process, after the
// thread was resumed, when the frames there may have changed. So the copy
// is sized per thread where that is cheap to know while the thread is
// stopped (BatchOptions.WindowAt), never by walking:
//
//   - dump copies each thread's used stack: from SP to the top of the
//     thread stack that holds SP, read from /proc/PID/maps once per batch
//     before any stop. For a pthread that is usually a few KiB (its
//     frames, and glibc's thread descriptor and static TLS at the top),
//     less than the window; a deep one gets all of it, up to maxStackCopy.
//     Reading the maps costs about 1.7 ms per batch with 1,000 threads.
//   - record and top copy the window, and learn: a walk reports how far up
//     it read the thread's stack (backend.Sample.StackUse); when that was
//     beyond the window, the thread's next samples copy up to there, until
//     learnKeep samples in a row no longer needed it. The sample that
//     found out was walked with the live fallback, as before.
//
// Either way only thread stacks grow a copy: the main thread's [stack] and
// anonymous mappings with a guard page right below them (glibc's and
// musl's pthread stacks; Go's cgo threads). Other memory a thread may run
// on (Go's goroutine and g0 stacks in its heap arenas, a coroutine's
// malloc'ed stack) keeps the fixed window: its mapping's end says nothing
// of where the thread's frames end. And no copy grows past maxStackCopy
// (or the window, if that is larger): the buffers are kept, and a copy of
// 1 MiB costs about 80 µs of stop.

// maxStackCopy bounds a copy that grew beyond the window.
const maxStackCopy = 1 << 20

// learnKeep is how many samples in a row a thread keeps a learned copy
// its walks no longer needed.
const learnKeep = 8

// stackRange is a mapping, [start, end), and whether it is a thread stack.
type stackRange struct {
	start, end uint64
	stack      bool
}

// threadStacks are the mappings of a process, from one reading of its
// maps, sorted by start, each marked a thread stack or not.
type threadStacks []stackRange

// readThreadStacks reads pid's maps once. An error leaves no stacks:
// every copy is the fixed window.
func readThreadStacks(pid int) threadStacks {
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		return nil
	}
	return stacksOf(maps)
}

// stacksOf marks the thread stacks of maps (sorted by address, as the
// kernel lists them).
func stacksOf(maps []procmaps.Mapping) threadStacks {
	out := make(threadStacks, 0, len(maps))
	for i, m := range maps {
		rw := m.Perms&(procmaps.PermRead|procmaps.PermWrite) == procmaps.PermRead|procmaps.PermWrite
		stack := rw && (m.Kind == procmaps.KindStack ||
			m.Kind == procmaps.KindPseudo && strings.Contains(m.Path, "stack") || // [anon: glibc: pthread stack: TID]
			m.Kind == procmaps.KindAnon && i > 0 && maps[i-1].End == m.Start && isGuard(&maps[i-1]))
		out = append(out, stackRange{m.Start, m.End, stack})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// isGuard reports whether m is a guard: no access at all.
func isGuard(m *procmaps.Mapping) bool {
	return m.Perms&(procmaps.PermRead|procmaps.PermWrite|procmaps.PermExec) == 0
}

// find returns the mapping that holds sp (ok false: none did when the
// maps were read). It runs while a thread is stopped: a binary search, no
// allocation.
func (t threadStacks) find(sp uint64) (stackRange, bool) {
	i, j := 0, len(t)
	for i < j {
		h := int(uint(i+j) >> 1)
		if t[h].end > sp {
			j = h
		} else {
			i = h + 1
		}
	}
	if i < len(t) && t[i].start <= sp {
		return t[i], true
	}
	return stackRange{}, false
}

// copyLimit is the most a thread's copy may grow to with window.
func copyLimit(window int) int { return max(window, maxStackCopy) }

// stackTop is where the stack of a thread stopped at sp, with thread
// pointer tp, ends: the end of the thread stack that holds sp, or, on
// memory not known as one, tp when it lies above sp in the same mapping.
// glibc and musl put a thread's control block and static TLS at the top
// of the stack they allocate for it, so a pthread stack whose guard is not
// a mapping of its own (glibc 2.42 guards with MADV_GUARD_INSTALL where
// the kernel has it) is still known, and the copy ends at its frames'
// end. Go's threads keep tp in a heap arena: tp above sp in the same
// arena passes, and limit bounds what that costs.
func (t threadStacks) stackTop(sp, tp uint64) (r stackRange, top uint64, ok bool) {
	r, found := t.find(sp)
	switch {
	case !found:
		return stackRange{}, 0, false
	case r.stack:
		return r, r.end, true
	case tp > sp && tp <= r.end:
		return r, tp, true
	}
	return r, 0, false
}

// usedStack is the copy of a thread stopped at sp with thread pointer tp
// for a dump: its stack up from sp (at most limit), or window if sp is on
// no thread stack.
func (t threadStacks) usedStack(sp, tp uint64, window, limit int) int {
	if _, top, ok := t.stackTop(sp, tp); ok {
		return int(min(top-sp, uint64(limit)))
	}
	return window
}

// learned is what record and top learned of a thread's stack: its walks
// needed [low, end) of its thread stack, beyond the window.
type learned struct {
	low, end uint64
	keep     int // samples left that may not need it before it is dropped
}

// window is the copy of the thread stopped at sp: up to the learned end
// (at most limit) when sp lies on the stack it was learned on.
func (l *learned) window(sp uint64, window, limit int) int {
	if l.end == 0 || sp < l.low || sp >= l.end {
		return window
	}
	return max(window, int(min(l.end-sp, uint64(limit))))
}

// learn updates l from a walk of a sample at sp (thread pointer tp) that read its stack up to
// use.End, with a fixed copy of window bytes. stacks finds sp's thread
// stack; ok is false when it did not know sp's mapping (a stack mapped
// since the maps were read), which the caller may read again.
func (l *learned) learn(sp, tp uint64, use backend.StackUse, window int, stacks threadStacks) (ok bool) {
	if use.End <= sp+uint64(window) {
		if l.keep--; l.keep <= 0 {
			*l = learned{}
		}
		return true
	}
	if _, found := stacks.find(sp); !found {
		return false
	}
	r, top, isStack := stacks.stackTop(sp, tp)
	if !isStack || use.End > top {
		return true // not a thread stack's: keep what was learned
	}
	*l = learned{low: r.start, end: use.End, keep: learnKeep}
	return true
}
