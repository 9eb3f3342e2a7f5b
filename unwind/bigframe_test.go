package unwind

import (
	"encoding/binary"
	"errors"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// A leaf with a 40 KiB frame on s390x: its saved r14 lies beyond a 16 KiB
// window copied at the sample. The window is a hint, not a wall: the step
// reads the rest through the window's Fallback (the live process, or here
// the whole stack), and without one says which read failed.
func TestFrameLargerThanWindow(t *testing.T) {
	const big = 40 << 10
	s := newFakeStack(stackLow, 64<<10, binary.BigEndian)
	callerSP := s.high() - 256
	s.put(callerSP+112, s390Start+0x20) // stmg %r14,%r15,112(%r15): RA into _start
	s.put(callerSP+120, callerSP)
	sp := callerSP - big // lay %r15,-40K(%r15): CFA = sp+40K+160 = callerSP+160
	rows := &fakeRows{}
	rows.add(s390Start, s390Main, outermost)
	rows.add(s390Bar, s390End, sframe.Row{CFA: cfaReg(regs.S390XSP, 160+big), RA: atCFA(-48), FP: same})
	r := regs.Set{Arch: regs.S390X, PC: s390Bar + 0x10}
	r.Put(regs.S390XSP, sp)
	mods := NewModuleList(s390Module(rows))

	full := s.window()
	window := &StackWindow{Base: sp, Bytes: full.Bytes[sp-s.low : sp-s.low+16<<10], Fallback: full}
	st := Walk(r, window, mods, Options{Stack: s.bounds()})
	checkFrames(t, st, []wantFrame{{s390Bar + 0x10, sp, MethodRegs}, {s390Start + 0x20, callerSP, MethodSFrame}})
	checkStop(t, st, nil, 0)

	window.Fallback = nil
	st = Walk(r, window, mods, Options{Stack: s.bounds()})
	checkStop(t, st, ErrMemory, 0)
	if se := (*StepError)(nil); !errors.As(st.Err, &se) || se.Addr != callerSP+112 {
		t.Errorf("err %v, want the read of the saved r14 at %#x", st.Err, callerSP+112)
	}
}

// The window records what the walk needed of the stack: the read of the
// saved r14 beyond the copy is missed, and a copy up to Reached (what a
// sampler copies of the thread next time) holds every read of the walk.
func TestWindowRecordsReach(t *testing.T) {
	const big = 40 << 10
	s := newFakeStack(stackLow, 64<<10, binary.BigEndian)
	callerSP := s.high() - 256
	s.put(callerSP+112, s390Start+0x20)
	s.put(callerSP+120, callerSP)
	sp := callerSP - big
	rows := &fakeRows{}
	rows.add(s390Start, s390Main, outermost)
	rows.add(s390Bar, s390End, sframe.Row{CFA: cfaReg(regs.S390XSP, 160+big), RA: atCFA(-48), FP: same})
	r := regs.Set{Arch: regs.S390X, PC: s390Bar + 0x10}
	r.Put(regs.S390XSP, sp)
	mods := NewModuleList(s390Module(rows))
	want := []wantFrame{{s390Bar + 0x10, sp, MethodRegs}, {s390Start + 0x20, callerSP, MethodSFrame}}

	full := s.window()
	window := &StackWindow{Base: sp, Bytes: full.Bytes[sp-s.low : sp-s.low+16<<10], Fallback: full, StackEnd: s.high()}
	st := Walk(r, window, mods, Options{Stack: s.bounds()})
	checkFrames(t, st, want)
	if window.Missed == 0 || window.Reached < callerSP+120 || window.Reached > s.high() {
		t.Fatalf("16 KiB copy: missed %d, reached %#x; want a miss and the end of the saved r14 (%#x)", window.Missed, window.Reached, callerSP+120)
	}

	reached := window.Reached
	window = &StackWindow{Base: sp, Bytes: full.Bytes[sp-s.low : reached-s.low], StackEnd: s.high()}
	st = Walk(r, window, mods, Options{Stack: s.bounds()})
	checkFrames(t, st, want)
	checkStop(t, st, nil, 0)
	if window.Missed != 0 || window.Reached != reached {
		t.Errorf("copy up to %#x: missed %d, reached %#x; want none missed, the same reach", reached, window.Missed, window.Reached)
	}

	// Reads outside the stack (code, another mapping) are not the stack's.
	window = &StackWindow{Base: sp, Bytes: full.Bytes[sp-s.low : sp-s.low+16<<10], Fallback: full, StackEnd: callerSP}
	Walk(r, window, mods, Options{Stack: s.bounds()})
	if window.Missed != 0 || window.Reached > callerSP {
		t.Errorf("stack ending below the read: missed %d, reached %#x; want nothing recorded above %#x", window.Missed, window.Reached, callerSP)
	}
}
