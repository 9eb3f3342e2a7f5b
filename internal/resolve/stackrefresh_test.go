package resolve

import (
	"encoding/binary"
	"os"
	"reflect"
	"runtime"
	"syscall"
	"testing"

	"stacktop/internal/backend"
	"stacktop/internal/modules"
	"stacktop/ptrace"
	"stacktop/regs"
)

//go:noinline
func stackRefreshPC() int { return 1 }

// TestWalkLearnsNewStackMapping: a walk whose stack pointer lies on memory
// mapped after the resolver read the maps (a thread created later) reads
// them again, so it knows that stack's end and reports what it read of it
// (s.StackUse, from which the ptrace back end learns the thread's copy).
// The "thread" is this process with a frame record on a fresh mapping.
func TestWalkLearnsNewStackMapping(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the frame record below is x86-64's")
	}
	pid := os.Getpid()
	cache := modules.NewModuleCache()
	defer cache.Close()
	mem := ptrace.NewMemory(pid)
	defer mem.Close()
	r, err := New(pid, mem, cache, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

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
