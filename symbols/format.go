package symbols

import (
	"path/filepath"
	"strconv"
)

// Describe splits a frame's address into what to print before and after
// the "+": the symbol's name and the offset into it when sym (as returned
// with ok by Lookup) covers vaddr, else the module's base name and vaddr
// itself. vaddr is an ELF virtual address (runtime PC minus load bias), so
// for a PIE or shared library "libc.so.6+0x2a1ca" is the same number
// objdump and addr2line take. A frame is never dropped for lack of a name.
func Describe(sym Symbol, ok bool, vaddr uint64, module string) (function string, offset uint64) {
	if ok && sym.Contains(vaddr) {
		return sym.Name, vaddr - sym.Start
	}
	return moduleBase(module), vaddr
}

// FormatFrame is Describe joined as "function+0xoff" (or "module+0xoff").
func FormatFrame(sym Symbol, ok bool, vaddr uint64, module string) string {
	fn, off := Describe(sym, ok, vaddr, module)
	return joinOffset(fn, off)
}

// ModuleOffsetName names an address no symbol covers: "libc.so.6+0x2a1ca",
// the module's base name and the ELF virtual address. An empty module
// name gives "??+0x…", as gdb prints unknown code.
func ModuleOffsetName(module string, elfVaddr uint64) string {
	return joinOffset(moduleBase(module), elfVaddr)
}

func moduleBase(module string) string {
	if module == "" {
		return "??"
	}
	return filepath.Base(module)
}

func joinOffset(name string, off uint64) string {
	b := make([]byte, 0, len(name)+19)
	b = append(b, name...)
	b = append(b, "+0x"...)
	b = strconv.AppendUint(b, off, 16)
	return string(b)
}
