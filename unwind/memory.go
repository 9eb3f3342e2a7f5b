package unwind

import (
	"encoding/binary"
	"errors"
	"io"
	"sort"

	"codeberg.org/stacktop/stacktop/regs"
)

// ErrOutsideWindow is returned by StackWindow.ReadAt for bytes outside the
// captured window when there is no Fallback.
var ErrOutsideWindow = errors.New("unwind: address outside the captured stack window")

// StackWindow is a Memory that serves reads from a captured copy of the
// stack, [Base, Base+len(Bytes)), and everything else from Fallback (the
// live process; nil when only the capture exists). The sampler copies the
// window while the thread is stopped and unwinds after resuming it, so the
// frames it walks are the ones that existed at the sample.
//
// With StackEnd set, the window also records what a walk needed of the
// thread's stack, [Base, StackEnd): how far up it read (Reached) and how
// many of those reads the copy did not hold (Missed), which went to
// Fallback, that is to memory the thread may have changed since. A
// sampler sizes its next copies of the thread from them; a test proves
// with Missed that a walk used the stopped copy only. Set them to zero
// before reusing a window for another walk.
type StackWindow struct {
	Base     uint64
	Bytes    []byte
	Fallback io.ReaderAt

	// StackEnd is the end of the stack Base lies in (its mapping); 0
	// records nothing.
	StackEnd uint64
	// Reached is the end of the highest read of [Base, StackEnd) (0:
	// none), whether the copy held it or not.
	Reached uint64
	// Missed counts the reads of [Base, StackEnd) the copy did not hold.
	Missed int
}

// note records a read of [addr, addr+n) of the thread's stack.
func (w *StackWindow) note(addr, n uint64, held bool) {
	if addr < w.Base || addr >= w.StackEnd {
		return
	}
	end := min(addr+n, w.StackEnd)
	w.Reached = max(w.Reached, end)
	if !held {
		w.Missed++
	}
}

// contains reports whether [addr, addr+n) lies inside the window.
func (w *StackWindow) contains(addr, n uint64) bool {
	if addr < w.Base {
		return false
	}
	off := addr - w.Base
	size := uint64(len(w.Bytes))
	return off <= size && n <= size-off
}

// Word reads the word at addr from the copy in byte order order,
// recorded as ReadAt records it; ok is false when the copy does not hold
// all 8 bytes (read them through ReadAt then). It is the walkers' fast
// path: no interface call, no buffer.
func (w *StackWindow) Word(addr uint64, order binary.ByteOrder) (v uint64, ok bool) {
	if !w.contains(addr, 8) {
		return 0, false
	}
	if w.StackEnd != 0 {
		w.note(addr, 8, true)
	}
	return order.Uint64(w.Bytes[addr-w.Base:]), true
}

// ReadAt reads len(p) bytes at address off. A read that is not entirely
// inside the window goes to Fallback as a whole; without one, the bytes
// that are inside are copied and ErrOutsideWindow is returned.
func (w *StackWindow) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, ErrOutsideWindow
	}
	addr := uint64(off)
	held := w.contains(addr, uint64(len(p)))
	if w.StackEnd != 0 {
		w.note(addr, uint64(len(p)), held)
	}
	if held {
		return copy(p, w.Bytes[addr-w.Base:]), nil
	}
	if w.Fallback != nil {
		return w.Fallback.ReadAt(p, off)
	}
	if addr >= w.Base && addr-w.Base < uint64(len(w.Bytes)) {
		return copy(p, w.Bytes[addr-w.Base:]), ErrOutsideWindow
	}
	return 0, ErrOutsideWindow
}

// ByteOrder is the byte order of a Linux target's memory for arch:
// big-endian on s390x, little-endian on amd64 and arm64 (aarch64
// big-endian Linux exists but is rare: pass Options.ByteOrder for it).
func ByteOrder(a regs.Arch) binary.ByteOrder {
	if a == regs.S390X {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// ModuleList is a Modules over modules sorted by Start with
// non-overlapping ranges (NewModuleList sorts them). Converting a slice to
// an interface allocates: on a hot path keep the Modules value (or pass
// &list) rather than passing the ModuleList to every Walk.
type ModuleList []Module

// NewModuleList returns the modules sorted by Start.
func NewModuleList(mods ...Module) ModuleList {
	l := ModuleList(mods)
	sort.Slice(l, func(i, j int) bool { return l[i].Start < l[j].Start })
	return l
}

// ModuleAt finds the module whose [Start, End) holds pc.
func (l ModuleList) ModuleAt(pc uint64) (*Module, bool) {
	// First module whose End is above pc (a hand-written sort.Search, so
	// the sampling hot path has no closure).
	i, j := 0, len(l)
	for i < j {
		h := int(uint(i+j) >> 1)
		if l[h].End > pc {
			j = h
		} else {
			i = h + 1
		}
	}
	if i < len(l) && l[i].Start <= pc && pc < l[i].End {
		return &l[i], true
	}
	return nil, false
}
