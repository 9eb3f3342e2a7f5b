package backchain

import (
	"debug/elf"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/unwind"
)

// gcc's s390x output with -mbackchain: spin_leaf allocates a frame and
// stores its back chain but saves no r14, so the slot the back chain
// leads to is stale (here an older return into leaf_caller, as an earlier
// call leaves it). The step finds leaf_caller's real return address in
// r14, after the real BRASL, with the real symbols' sizes.
func TestTopmostLeafR14RealCode(t *testing.T) {
	if _, err := exec.LookPath("s390x-linux-gnu-gcc"); err != nil {
		t.Skip("s390x-linux-gnu-gcc not installed")
	}
	bin := filepath.Join(t.TempDir(), "spin")
	if out, err := exec.Command("s390x-linux-gnu-gcc", "-std=gnu11", "-O2", "-static", "-pthread", "-mbackchain",
		"-fno-stack-protector", "-o", bin, "../testdata/cross/spin.c").CombinedOutput(); err != nil {
		t.Skipf("s390x-linux-gnu-gcc: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".text")
	text, _ := sec.Data()
	syms, _ := f.Symbols()
	funcs := map[string]elf.Symbol{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
			funcs[s.Name] = s
		}
	}
	funcAt := func(pc uint64) (uint64, uint64, bool) {
		for _, s := range funcs {
			if pc >= s.Value && pc < s.Value+s.Size {
				return s.Value, s.Value + s.Size, true
			}
		}
		return 0, 0, false
	}
	// The BRASL in caller whose target is callee; its return address.
	brasl := func(caller, callee string) uint64 {
		s := funcs[caller]
		code := text[s.Value-sec.Addr : s.Value-sec.Addr+s.Size]
		for i := 0; i+6 <= len(code); i += 2 {
			if code[i] == 0xc0 && code[i+1]&0x0f == 5 {
				off := int64(int32(binary.BigEndian.Uint32(code[i+2:]))) * 2
				if uint64(int64(s.Value)+int64(i)+off) == funcs[callee].Value {
					return s.Value + uint64(i) + 6
				}
			}
		}
		t.Skipf("no brasl %s in %s", callee, caller)
		return 0
	}
	raCaller := brasl("leaf_caller", "spin_leaf")
	raThread := brasl("leaf_thread", "leaf_caller")

	s := newStack(low, 0x1000)
	spThread := uint64(low + 0xe00)  // leaf_thread's frame
	s.put(spThread, 0)               // its back chain: the outermost here
	s.put(spThread+OffR14, raThread) // leaf_caller's stmg %r14,%r15,112(%r15)
	s.put(spThread+OffR15, spThread)
	spCaller := spThread - 160 // lay %r15,-160(%r15); stg %r14,0(%r15)
	s.put(spCaller, spThread)
	s.put(spCaller+OffR14, funcs["leaf_caller"].Value+0x10) // stale
	spLeaf := spCaller - 240                                // lay %r15,-240(%r15); std %f0,0(%r15)
	s.put(spLeaf, spCaller)

	r := s390xRegs(funcs["spin_leaf"].Value+0x1e, spLeaf, raCaller)
	win := s.window()
	win.Fallback = offsetCode{base: sec.Addr, text: text}
	mods := unwind.NewModuleList(unwind.Module{Start: sec.Addr, End: sec.Addr + uint64(len(text)), Path: "spin-s390x-backchain"})
	bounds := unwind.StackBounds{Low: low, High: low + 0x1000}

	old := unwind.Walk(r, win, mods, unwind.Options{Fallback: Unwinder{IsCode: isCodeIn(mods)}, Stack: bounds})
	if len(old.Frames) < 2 || old.Frames[1].PC == raCaller {
		t.Errorf("without FuncAt: %+v; want the stale return address", old.Frames)
	}
	st := unwind.Walk(r, win, mods, unwind.Options{Fallback: Unwinder{IsCode: isCodeIn(mods), FuncAt: funcAt}, Stack: bounds})
	want := []uint64{r.PC, raCaller, raThread}
	if !st.Complete || len(st.Frames) != len(want) {
		t.Fatalf("complete=%v err=%v frames=%+v", st.Complete, st.Err, st.Frames)
	}
	for i, fr := range st.Frames {
		if fr.PC != want[i] {
			t.Errorf("frame %d pc %#x, want %#x", i, fr.PC, want[i])
		}
	}
	if st.Frames[1].SP != spCaller || st.Frames[2].SP != spThread {
		t.Errorf("SPs %#x %#x, want %#x %#x", st.Frames[1].SP, st.Frames[2].SP, spCaller, spThread)
	}
}

type offsetCode struct {
	base uint64
	text []byte
}

func (c offsetCode) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a < c.base || a-c.base+uint64(len(p)) > uint64(len(c.text)) {
		return 0, unwind.ErrOutsideWindow
	}
	return copy(p, c.text[a-c.base:]), nil
}

func isCodeIn(mods unwind.ModuleList) func(uint64) bool {
	return func(pc uint64) bool { _, ok := mods.ModuleAt(pc); return ok }
}
