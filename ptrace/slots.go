//go:build linux

package ptrace

// A Process's batch storage (batchSlots): the slots, stack buffers and
// arena a window's samples are read into, all allocated before any stop.

import (
	"codeberg.org/stacktop/stacktop/regs"
)

// batchSlots is one Process's batch storage, reused across batches.
type batchSlots struct {
	slots []*Sample
	bufs  [][]byte // each slot's own stack buffer
	free  []*Sample
	ready []readySample
	// windowAt and maxWindow are the running batch's
	// BatchOptions.WindowAt and its bound; arena[:arenaUsed] holds the
	// copies of this window's threads that needed more than their slot.
	windowAt  func(tid int, r *regs.Set) int
	maxWindow int
	arena     []byte
	arenaUsed int
}

// prepare allocates what a window of the given slots needs (their stack
// buffers of n bytes, and the arena for WindowAt), before any stop.
func (b *batchSlots) prepare(slots, n int, o BatchOptions) {
	for len(b.slots) < slots {
		b.slots = append(b.slots, &Sample{})
		b.bufs = append(b.bufs, nil)
	}
	for i, s := range b.slots[:slots] {
		if cap(b.bufs[i]) != n {
			b.bufs[i] = touched(make([]byte, n))
		}
		s.Stack = b.bufs[i] // a copy cut from the arena is given back here
	}
	b.windowAt, b.maxWindow = o.WindowAt, max(o.MaxWindow, n)
	if b.windowAt != nil && len(b.arena) < b.maxWindow {
		// Not touched: only a copy larger than its slot (a main
		// thread's deep stack) is cut from it, and touching a MiB
		// costs a 1-thread dump a millisecond.
		b.arena = make([]byte, b.maxWindow)
	}
	if cap(b.ready) < slots { // (nothing grows during stops)
		b.ready = make([]readySample, 0, slots)
	}
	if cap(b.free) < slots {
		b.free = make([]*Sample, 0, slots)
	}
}

// touched writes to every page of buf and returns it (the slots' buffers,
// which every sample writes to). Memory fresh from
// the kernel is mapped at its first write: process_vm_readv copying into
// such a page faults in the tracer's own address space, and the fault
// waits for its mmap lock, which the Go runtime holds while it maps more
// heap for another goroutine. A dump's thread waited so, stopped, for
// 1-3 ms (kernel stacks: copy_page_to_iter, exc_page_fault,
// rwsem_down_read_slowpath); buffers touched before any stop do not
// fault.
func touched(buf []byte) []byte {
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 0
	}
	return buf
}

func (b *batchSlots) take() *Sample {
	s := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	return s
}
