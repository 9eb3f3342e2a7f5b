package unwind

import (
	"encoding/binary"
	"testing"

	"codeberg.org/stacktop/stacktop/regs"
)

// fakeSwitcher switches at frames whose PC (a return address) is in foo,
// playing Go's runtime.systemstack: foo switched from the goroutine's stack
// to the system stack and called bar there.
type fakeSwitcher struct {
	sw               Switch
	schedSP, schedBP uint64
	callerPC         uint64 // for SwitchCaller
	bounds           StackBounds
	calls            int
}

func (f *fakeSwitcher) SwitchStack(thread, cur *regs.Set, exact bool, mem Memory, order binary.ByteOrder, next *regs.Set) (StackBounds, Switch) {
	f.calls++
	if thread.TLS != 0xdead0000 {
		return StackBounds{}, SwitchNone
	}
	if exact || cur.PC-1 < rt(fooFn) || cur.PC-1 >= rt(barFn) {
		return StackBounds{}, SwitchNone
	}
	switch f.sw {
	case SwitchRegs:
		cur.Put(regs.AMD64RSP, f.schedSP)
		cur.Put(regs.AMD64RBP, f.schedBP)
	case SwitchCaller:
		// foo's caller as the switcher knows it: main's frame.
		*next = regs.Set{Arch: regs.AMD64, PC: f.callerPC}
		next.Put(regs.AMD64RSP, f.schedSP+16)
		b := make([]byte, 8)
		mem.ReadAt(b, int64(f.schedSP))
		next.Put(regs.AMD64RBP, order.Uint64(b))
	}
	return f.bounds, f.sw
}

// switchProgram builds _start -> main -> foo on a goroutine stack (the
// lower page) and bar on a system stack (the upper page), called by foo
// after it switched: bar's saved rbp is foo's frame on the goroutine's
// stack, as Go's systemstack leaves it.
func switchProgram() (s *fakeStack, r regs.Set, g, sys StackBounds, schedSP, schedBP uint64, want []wantFrame) {
	s = newFakeStack(stackLow, 0x2000, binary.LittleEndian)
	g = StackBounds{Low: stackLow, High: stackLow + 0x1000}
	sys = StackBounds{Low: stackLow + 0x1000, High: stackLow + 0x2000}
	s.sp = g.High - 64
	spStart := s.sp
	s.push(rt(startFn + 0x20)) // _start: call main
	s.push(0)
	rbp := s.sp
	s.sp -= 32
	spMain := s.sp
	s.push(rt(mainFn + 0x30)) // main: call foo
	s.push(rbp)
	rbp = s.sp
	schedSP, schedBP = s.sp, rbp // foo saves its SP and BP, then switches
	s.sp = sys.High - 64
	spFoo := s.sp
	s.push(rt(fooFn + 0x40)) // foo: call bar, on the system stack
	s.push(rbp)
	rbp = s.sp
	s.sp -= 48
	r = amd64Regs(rt(barFn+8), s.sp, rbp)
	r.TLS = 0xdead0000
	return s, r, g, sys, schedSP, schedBP, []wantFrame{
		{rt(barFn + 8), s.sp, MethodRegs},
		{rt(fooFn + 0x40), spFoo, MethodFP},
		{rt(mainFn + 0x30), spMain, MethodGoStack},
		{rt(startFn + 0x20), spStart, MethodFP},
	}
}

func TestStackSwitch(t *testing.T) {
	mods := NewModuleList(exeModule(nil))

	t.Run("without", func(t *testing.T) {
		// Without a switcher, foo's caller is found by its frame record,
		// but it lies below the system stack: the walk stops there.
		s, r, _, sys, _, _, want := switchProgram()
		st := Walk(r, s.window(), mods, Options{Stack: sys})
		checkFrames(t, st, want[:2])
		checkStop(t, st, ErrBadFP, 1)
	})
	for _, sw := range []Switch{SwitchRegs, SwitchCaller} {
		t.Run(map[Switch]string{SwitchRegs: "regs", SwitchCaller: "caller"}[sw], func(t *testing.T) {
			s, r, g, sys, schedSP, schedBP, want := switchProgram()
			fs := &fakeSwitcher{sw: sw, schedSP: schedSP, schedBP: schedBP, callerPC: rt(mainFn + 0x30), bounds: g}
			st := Walk(r, s.window(), mods, Options{Stack: sys, Switch: fs})
			checkFrames(t, st, want)
			checkStop(t, st, nil, 0)
			if fs.calls != len(want) {
				t.Errorf("switcher asked %d times, want once per step (%d)", fs.calls, len(want))
			}
		})
	}
	t.Run("thread", func(t *testing.T) {
		// The switcher sees frame 0's TLS at every step, not the
		// callee's registers (a step does not carry TLS).
		s, r, g, sys, schedSP, schedBP, want := switchProgram()
		r.TLS = 1
		fs := &fakeSwitcher{sw: SwitchRegs, schedSP: schedSP, schedBP: schedBP, bounds: g}
		st := Walk(r, s.window(), mods, Options{Stack: sys, Switch: fs})
		checkFrames(t, st, want[:2])
		checkStop(t, st, ErrBadFP, 1)
	})
}
