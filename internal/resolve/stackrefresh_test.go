package resolve

import (
	"encoding/binary"
	"os"
	"reflect"
	"runtime"
	"syscall"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/regs"
)

//go:noinline
func stackRefreshPC() int { return 1 }

// TestWalkLearnsNewStackMapping: a walk whose stack pointer lies on memory
// mapped after the resolver read the maps (a thread created later) reads
// them again, so it knows that stack's end and reports what it read of it
// (s.StackUse, from which the ptrace back end learns the thread's copy).
// The "thread" is this process with a frame record on a fresh mapping.
func TestWalkLearnsNewStackMapping(t *testing.T) {
	r, pid := selfResolver(t)

	stack, err := syscall.Mmap(-1, 0, 1<<16, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(stack)
	base := uint64(reflect.ValueOf(stack).Pointer())
	// At SP+0x100 a frame record: the caller's frame pointer (none) and
	// a return address.
	const fp = 0x100
	binary.LittleEndian.PutUint64(stack[fp:], 0)
	binary.LittleEndian.PutUint64(stack[fp+8:], uint64(reflect.ValueOf(stackRefreshPC).Pointer())+4)
	s := backend.Sample{TID: pid, StackAddr: base, Stack: stack[:0x200],
		Regs: regs.Set{Arch: regs.AMD64, PC: uint64(reflect.ValueOf(stackRefreshPC).Pointer()) + 1}}
	s.Regs.Put(regs.AMD64RSP, base)
	s.Regs.Put(regs.AMD64RBP, base+fp)
	r.Walk(&s)
	if s.StackUse.End <= base || s.StackUse.End > base+1<<16 {
		t.Errorf("StackUse %+v: the walk's reads of the new mapping [%#x, %#x) were not recorded", s.StackUse, base, base+1<<16)
	}
}

// TestWalkLearnsNewCode: a walk that reaches a return address in code
// mapped after the resolver read the maps (the C library, mapped by the
// dynamic loader after a program's first sample) reads them again and
// walks on, instead of ending the stack there. The caller here is an
// executable page mapped after New.
func TestWalkLearnsNewCode(t *testing.T) {
	r, pid := selfResolver(t)

	code, err := syscall.Mmap(-1, 0, 1<<12, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Skip("no executable mapping allowed here:", err)
	}
	defer syscall.Munmap(code)
	stack := make([]byte, 0x200)
	base := uint64(reflect.ValueOf(stack).Pointer())
	// At SP+0x100 a frame record: no caller's frame pointer, and a return
	// address into the new code.
	const fp = 0x100
	ret := uint64(reflect.ValueOf(code).Pointer()) + 0x10
	binary.LittleEndian.PutUint64(stack[fp:], 0)
	binary.LittleEndian.PutUint64(stack[fp+8:], ret)
	s := backend.Sample{TID: pid, StackAddr: base, Stack: stack,
		Regs: regs.Set{Arch: regs.AMD64, PC: uint64(reflect.ValueOf(stackRefreshPC).Pointer()) + 1}}
	s.Regs.Put(regs.AMD64RSP, base)
	s.Regs.Put(regs.AMD64RBP, base+fp)
	st := r.Walk(&s)
	if len(st.Frames) < 2 || st.Frames[1].PC != ret {
		t.Errorf("walk %+v (err %v): want the caller at %#x, in code mapped after New", st.Frames, st.Err, ret)
	}
}

// selfResolver is a Resolver of this test process, made now: what is
// mapped later is new to it. The tests' frame records are x86-64's.
func selfResolver(t *testing.T) (*Resolver, int) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the frame record below is x86-64's")
	}
	pid := os.Getpid()
	cache := modules.NewModuleCache()
	t.Cleanup(func() { cache.Close() })
	mem := ptrace.NewMemory(pid)
	t.Cleanup(func() { mem.Close() })
	r, err := New(pid, mem, cache, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, pid
}
