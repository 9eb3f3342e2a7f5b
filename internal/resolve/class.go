package resolve

import (
	"debug/elf"
	"errors"
	"fmt"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// ErrNot64Bit: the target runs a 32-bit program (i386 on x86-64, arm on
// arm64). Its registers and stack are in the 32-bit ABI, which the
// unwinder does not read: stacktop refuses it instead of printing stacks
// of zeros.
var ErrNot64Bit = errors.New("32-bit program")

// CheckClass refuses a process whose program is a 32-bit ELF file. It
// reads the ELF identification of /proc/PID/exe; a process whose program
// cannot be read (gone, or a kernel thread, which Attach refuses with its
// own reason) passes.
func CheckClass(pid int) error {
	f, err := procmaps.OpenExecutable(pid)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ident [elf.EI_NIDENT]byte
	if _, err := f.ReadAt(ident[:], 0); err != nil || string(ident[:4]) != elf.ELFMAG {
		return nil
	}
	if elf.Class(ident[elf.EI_CLASS]) == elf.ELFCLASS32 {
		return fmt.Errorf("process %d (%s) is a %w: stacktop reads 64-bit processes only", pid, procmaps.Executable(pid), ErrNot64Bit)
	}
	return nil
}
