package gort

import (
	"codeberg.org/stacktop/stacktop/debuginfo"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

var (
	// ErrNotGo: the executable has no runtime.systemstack symbol.
	ErrNotGo = errors.New("not a Go program (no runtime.systemstack symbol)")
	// ErrNoDWARF: the executable has no DWARF types of the Go runtime,
	// so the offsets of g, m and gobuf fields are unknown.
	ErrNoDWARF = errors.New("no DWARF types of the Go runtime (built with -ldflags=-w or stripped)")
	// ErrArch: the switch is not followed on this architecture yet.
	//lint:ignore ST1005 "Go" is a proper noun.
	ErrArch = errors.New("Go stack switches are followed on amd64 and arm64 only")
)

// funcRange is a function's ELF virtual address range [start, end).
type funcRange struct{ start, end uint64 }

func (r funcRange) has(vaddr uint64) bool { return vaddr >= r.start && vaddr < r.end }

// Funcs are the runtime functions where Go switches stacks, from the
// symbol table alone: enough to tell that a walk ended at a switch that a
// Layout, which needs DWARF, would have followed.
type Funcs struct {
	systemstack funcRange
	morestack   funcRange
	mcall       funcRange
	stoplockedm funcRange
}

// Missed reports whether a walk whose frames have the lookup addresses
// vaddrs (ELF virtual addresses, innermost first) ended at a switch that a
// Layout would have followed: in runtime.systemstack or runtime.morestack,
// whose caller is always on a goroutine's stack, or in runtime.mcall with
// runtime.stoplockedm above it (a thread waiting for its locked goroutine,
// which m.lockedg names). An idle thread in mcall's function, waiting for
// any goroutine, has no goroutine's frames to miss.
func (fs *Funcs) Missed(vaddrs []uint64) bool {
	if len(vaddrs) == 0 {
		return false
	}
	last := vaddrs[len(vaddrs)-1]
	if fs.systemstack.has(last) || fs.morestack.has(last) {
		return true
	}
	if !fs.mcall.has(last) || fs.stoplockedm.end == 0 {
		return false
	}
	for _, v := range vaddrs {
		if fs.stoplockedm.has(v) {
			return true
		}
	}
	return false
}

// LoadFuncs reads the switch functions from a Go executable's symbol
// table: what is known of a Go program whose DWARF is gone (Load's
// ErrNoDWARF).
func LoadFuncs(f *elf.File) (*Funcs, error) {
	fs, _, err := loadFuncs(f)
	return fs, err
}

func loadFuncs(f *elf.File) (fs *Funcs, tlsg *elf.Symbol, err error) {
	syms, err := f.Symbols()
	if err != nil {
		return nil, nil, fmt.Errorf("gort: symbol table: %w (%w)", err, ErrNotGo)
	}
	fs = &Funcs{}
	for i := range syms {
		s := &syms[i]
		// Assembly functions carry their ABI in the symbol name.
		name := strings.TrimSuffix(s.Name, ".abi0")
		switch {
		case name == "runtime.systemstack" && elf.ST_TYPE(s.Info) == elf.STT_FUNC:
			fs.systemstack = funcRange{s.Value, s.Value + s.Size}
		case name == "runtime.morestack" && elf.ST_TYPE(s.Info) == elf.STT_FUNC:
			fs.morestack = funcRange{s.Value, s.Value + s.Size}
		case name == "runtime.mcall" && elf.ST_TYPE(s.Info) == elf.STT_FUNC:
			fs.mcall = funcRange{s.Value, s.Value + s.Size}
		case name == "runtime.stoplockedm" && elf.ST_TYPE(s.Info) == elf.STT_FUNC:
			fs.stoplockedm = funcRange{s.Value, s.Value + s.Size}
		case name == "runtime.tlsg" && elf.ST_TYPE(s.Info) == elf.STT_TLS:
			tlsg = s
		}
	}
	if fs.systemstack.end == 0 {
		return nil, nil, fmt.Errorf("gort: %w", ErrNotGo)
	}
	return fs, tlsg, nil
}

// Layout is what the unwinder needs of one Go executable.
type Layout struct {
	Arch regs.Arch
	Funcs
	// tlsG is the offset of the g slot from the thread pointer (amd64).
	tlsG int64

	// Field offsets from the DWARF types.
	gStack, gM, gSched         uint64 // runtime.g: stack (a runtime.stack), m, sched (a runtime.gobuf)
	stackLo, stackHi           uint64 // runtime.stack
	mG0, mCurg, mLockedg       uint64 // runtime.m
	bufSP, bufPC, bufBP, bufLR uint64 // runtime.gobuf
}

// Load reads the layout of the Go runtime from an executable. Its ELF and
// DWARF are untrusted input: a malformed file is an error, never a panic.
func Load(f *elf.File) (l *Layout, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("gort: malformed executable: %v", r)
		}
	}()
	l = &Layout{}
	switch f.Machine {
	case elf.EM_X86_64:
		l.Arch = regs.AMD64
	case elf.EM_AARCH64:
		l.Arch = regs.ARM64
	default:
		return nil, fmt.Errorf("gort: %v: %w", f.Machine, ErrArch)
	}
	fs, tlsg, err := loadFuncs(f)
	if err != nil {
		return nil, err
	}
	l.Funcs = *fs
	if l.Arch == regs.AMD64 {
		if l.tlsG, err = tlsOffset(f, tlsg); err != nil {
			return nil, err
		}
	}
	// Only the entries are read: decompressing the line tables too
	// (f.DWARF()) was most of a Go program's first dump.
	d, err := debuginfo.LoadDWARFTypes(f)
	if err != nil {
		return nil, fmt.Errorf("gort: %w: %v", ErrNoDWARF, err)
	}
	if err := l.readTypes(d); err != nil {
		return nil, err
	}
	return l, nil
}

// tlsOffset is where g lives relative to the thread pointer (x86-64 TLS
// variant II: the executable's block ends at the thread pointer). The Go
// linker's own executables have no PT_TLS and keep g at -8(FS) (the runtime
// sets fs_base 8 bytes past m.tls[0]); a PIE has a PT_TLS of that one
// slot, and an externally linked program places runtime.tlsg in PT_TLS.
func tlsOffset(f *elf.File, tlsg *elf.Symbol) (int64, error) {
	var tls *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_TLS {
			tls = p
		}
	}
	if tls == nil {
		return -8, nil
	}
	// A PIE from the Go linker has a PT_TLS of the one 8-byte slot and no
	// runtime.tlsg symbol: the slot is the block's start. A wrong guess
	// (an externally linked program without the symbol) reads a word that
	// fails the g == m.g0 check: no switch, never a wrong one.
	var at uint64
	if tlsg != nil {
		at = tlsg.Value
	}
	align := tls.Align
	if align == 0 {
		align = 1
	}
	size := (tls.Memsz + align - 1) &^ (align - 1)
	return int64(at) - int64(size), nil
}

// readTypes finds the member offsets of the runtime's structures in the
// DWARF types. The types are top-level entries of the runtime's unit;
// everything else is skipped whole.
func (l *Layout) readTypes(d *dwarf.Data) error {
	want := map[string]map[string]*uint64{
		"runtime.g":     {"stack": &l.gStack, "m": &l.gM, "sched": &l.gSched},
		"runtime.stack": {"lo": &l.stackLo, "hi": &l.stackHi},
		"runtime.m":     {"g0": &l.mG0, "curg": &l.mCurg, "lockedg": &l.mLockedg},
		"runtime.gobuf": {"sp": &l.bufSP, "pc": &l.bufPC, "bp": &l.bufBP, "lr": &l.bufLR},
	}
	found := map[string]int{}
	r := d.Reader()
	for len(found) < len(want) {
		e, err := r.Next()
		if err != nil {
			return fmt.Errorf("gort: reading DWARF: %w", err)
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		fields, ok := want[name]
		if e.Tag != dwarf.TagStructType || !ok {
			if e.Children {
				r.SkipChildren()
			}
			continue
		}
		if _, dup := found[name]; dup || !e.Children {
			continue
		}
		n := 0
		for {
			m, err := r.Next()
			if err != nil {
				return fmt.Errorf("gort: reading DWARF of %s: %w", name, err)
			}
			if m == nil || m.Tag == 0 {
				break
			}
			if m.Children {
				r.SkipChildren()
			}
			mname, _ := m.Val(dwarf.AttrName).(string)
			off, ok := m.Val(dwarf.AttrDataMemberLoc).(int64)
			if p := fields[mname]; p != nil && ok && m.Tag == dwarf.TagMember {
				*p = uint64(off)
				n++
			}
		}
		if n != len(fields) {
			return fmt.Errorf("gort: DWARF type %s has %d of the fields %v", name, n, keys(fields))
		}
		found[name] = n
	}
	if len(found) < len(want) {
		var missing []string
		for name := range want {
			if _, ok := found[name]; !ok {
				missing = append(missing, name)
			}
		}
		return fmt.Errorf("gort: %w: missing %v", ErrNoDWARF, missing)
	}
	return nil
}

func keys(m map[string]*uint64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Switcher is the layout applied to one process whose executable is mapped
// at Bias (runtime address = ELF virtual address + Bias).
func (l *Layout) Switcher(bias uint64) *Switcher { return &Switcher{l: l, bias: bias} }

// Switcher follows Go's systemstack and morestack switches; it implements
// unwind.StackSwitcher. Like a Walker it is not safe for concurrent use.
type Switcher struct {
	l    *Layout
	bias uint64
	buf  [8]byte
	// entry is the frame a morestack switch just returned (f at its
	// entry), whose caller the next call steps; zero when none.
	entry entryFrame
}

type entryFrame struct {
	pc, sp, bp, lr uint64 // lr: f's return address (arm64, sched.lr)
	bounds         unwind.StackBounds
}

var _ unwind.StackSwitcher = (*Switcher)(nil)

// arm64G is the DWARF number of x28, Go's g register on arm64.
const arm64G = 28

// goroutine is what a switch needs of the thread's Go state.
type goroutine struct {
	curg                               uint64
	lo, hi                             uint64 // curg's stack
	g0lo, g0hi                         uint64 // the system stack
	schedSP, schedPC, schedBP, schedLR uint64
}

// SwitchStack: cur is a frame in runtime.systemstack (its callee ran on
// g0), in runtime.morestack (newstack runs on g0) or in runtime.mcall (its
// fn, park_m, gosched_m..., runs on g0), the thread's g is its m's g0 with
// a goroutine to return to, and cur's SP is on g0's stack, not the
// goroutine's. The caller is then on the goroutine's stack, where g.sched
// was saved when the switch was made:
//   - systemstack saved its own SP and BP (sched.sp, sched.bp) before it
//     switched: they are its frame's registers on the goroutine's stack
//     (SwitchRegs), from which its CFI row or frame record gives its
//     caller, whether or not the assembler gave systemstack a frame (it
//     does from some Go release on). Go's traceback shows fn, systemstack,
//     caller, as here.
//   - morestack saved the PC, SP and BP of the function f whose prologue
//     called it, before f pushed its frame: f is the caller (SwitchCaller),
//     and the next call, from f, takes f's return address at [sp] (amd64)
//     or from sched.lr (arm64, where f's prologue moved it to R3), as at a
//     function's entry.
//   - mcall saved its caller's return address and SP (sched.pc, sched.sp):
//     the caller (gopark, Gosched...) is the next frame (SwitchCaller). On
//     amd64 mcall stores the caller's caller's BP, not the caller's own, so
//     the caller's FP is left unknown and its CFI row steps it; on arm64
//     sched.bp is the caller's x29, a frame record.
//
// The goroutine is m.curg. mcall's and morestack's functions may already
// have dropped it (park_m, gopreempt_m: m.curg is nil while the thread
// waits in schedule): a goroutine locked to the thread (m.lockedg) can
// only resume on it, so its sched is still what this thread will return
// to and the walk goes on there; an unlocked one may run elsewhere by now,
// and the walk ends at mcall as Go's traceback and gdb end it.
//
// Only a frame in systemstack, morestack or mcall costs memory reads (g,
// m and the goroutine's fields); every other frame is answered from its PC.
func (s *Switcher) SwitchStack(thread, cur *regs.Set, exact bool, mem unwind.Memory, order binary.ByteOrder, next *regs.Set) (unwind.StackBounds, unwind.Switch) {
	if exact {
		// Frame 0 (or a frame a signal interrupted): a new walk, or a new
		// context; no morestack caller is pending.
		s.entry = entryFrame{}
	}
	if thread.Arch != s.l.Arch || cur.PC < s.bias {
		return unwind.StackBounds{}, unwind.SwitchNone
	}
	sp := cur.SP()
	if e := s.entry; e.pc != 0 && cur.PC == e.pc && sp == e.sp {
		// f, stopped in its prologue's call of morestack: at its entry.
		s.entry = entryFrame{}
		ra := e.lr
		if cur.Arch == regs.AMD64 {
			var ok bool
			if ra, ok = s.word(mem, order, sp); !ok {
				return unwind.StackBounds{}, unwind.SwitchNone
			}
			sp += 8
		}
		*next = regs.Set{Arch: cur.Arch, PC: ra}
		next.Put(cur.Arch.SPReg(), sp)
		next.Put(cur.Arch.FPReg(), e.bp)
		return e.bounds, unwind.SwitchCaller
	}
	pc := cur.PC
	if !exact {
		pc--
	}
	vaddr := pc - s.bias
	inSystemstack, inMorestack, inMcall := s.l.systemstack.has(vaddr), s.l.morestack.has(vaddr), s.l.mcall.has(vaddr)
	if !inSystemstack && !inMorestack && !inMcall {
		// Every other frame: no memory is read.
		return unwind.StackBounds{}, unwind.SwitchNone
	}
	var g goroutine
	if !s.goroutine(thread, mem, order, !inSystemstack, &g) {
		return unwind.StackBounds{}, unwind.SwitchNone
	}
	// On the system stack: not on the goroutine's, and on g0's when its
	// bounds are known (a thread the runtime did not create may leave
	// them empty).
	onG0 := !(sp >= g.lo && sp < g.hi) && (g.g0lo >= g.g0hi || sp >= g.g0lo && sp < g.g0hi)
	if !onG0 || g.schedSP < g.lo || g.schedSP >= g.hi {
		return unwind.StackBounds{}, unwind.SwitchNone
	}
	bounds := unwind.StackBounds{Low: g.lo, High: g.hi}
	switch {
	case inSystemstack:
		// systemstack's own frame on the goroutine's stack: sched.sp is
		// its SP after its prologue, sched.bp its frame pointer (x29 on
		// arm64, whose frame record holds the return address).
		cur.Put(cur.Arch.SPReg(), g.schedSP)
		cur.Put(cur.Arch.FPReg(), g.schedBP)
		return bounds, unwind.SwitchRegs
	case inMcall:
		*next = regs.Set{Arch: cur.Arch, PC: g.schedPC}
		next.Put(cur.Arch.SPReg(), g.schedSP)
		if cur.Arch != regs.AMD64 {
			next.Put(cur.Arch.FPReg(), g.schedBP)
		}
		return bounds, unwind.SwitchCaller
	}
	if cur.Arch == regs.ARM64 && g.schedLR == 0 {
		return unwind.StackBounds{}, unwind.SwitchNone
	}
	*next = regs.Set{Arch: cur.Arch, PC: g.schedPC}
	next.Put(cur.Arch.SPReg(), g.schedSP)
	next.Put(cur.Arch.FPReg(), g.schedBP)
	s.entry = entryFrame{pc: g.schedPC, sp: g.schedSP, bp: g.schedBP, lr: g.schedLR, bounds: bounds}
	return bounds, unwind.SwitchCaller
}

// goroutine reads the thread's g, checks that it is its m's g0 with a
// goroutine to return to (m.curg, or with locked m.lockedg when m.curg is
// nil), and reads that goroutine's stack and saved context.
func (s *Switcher) goroutine(thread *regs.Set, mem unwind.Memory, order binary.ByteOrder, locked bool, out *goroutine) bool {
	l := s.l
	var g uint64
	switch thread.Arch {
	case regs.AMD64:
		if thread.TLS == 0 {
			return false
		}
		var ok bool
		if g, ok = s.word(mem, order, uint64(int64(thread.TLS)+l.tlsG)); !ok {
			return false
		}
	case regs.ARM64:
		// Go code keeps g in x28 (the TLS slot is written only with cgo).
		// Frame 0 in other code may hold anything there: the checks
		// below (g is its m's g0, curg's stack holds sched.sp) reject it.
		g, _ = thread.Get(arm64G)
	}
	if g == 0 {
		return false
	}
	m, ok := s.word(mem, order, g+l.gM)
	if !ok || m == 0 {
		return false
	}
	g0, ok1 := s.word(mem, order, m+l.mG0)
	curg, ok2 := s.word(mem, order, m+l.mCurg)
	if ok2 && curg == 0 && locked {
		curg, ok2 = s.word(mem, order, m+l.mLockedg)
	}
	if !ok1 || !ok2 || g0 != g || curg == 0 || curg == g0 {
		return false
	}
	out.curg = curg
	var ok3, ok4, ok5, ok6, ok7, ok8 bool
	out.g0lo, ok1 = s.word(mem, order, g0+l.gStack+l.stackLo)
	out.g0hi, ok2 = s.word(mem, order, g0+l.gStack+l.stackHi)
	out.lo, ok3 = s.word(mem, order, curg+l.gStack+l.stackLo)
	out.hi, ok4 = s.word(mem, order, curg+l.gStack+l.stackHi)
	out.schedSP, ok5 = s.word(mem, order, curg+l.gSched+l.bufSP)
	out.schedPC, ok6 = s.word(mem, order, curg+l.gSched+l.bufPC)
	out.schedBP, ok7 = s.word(mem, order, curg+l.gSched+l.bufBP)
	out.schedLR, ok8 = s.word(mem, order, curg+l.gSched+l.bufLR)
	return ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8 && out.lo < out.hi
}

func (s *Switcher) word(mem unwind.Memory, order binary.ByteOrder, addr uint64) (uint64, bool) {
	if _, err := mem.ReadAt(s.buf[:], int64(addr)); err != nil {
		return 0, false
	}
	return order.Uint64(s.buf[:]), true
}

// Layout returns the layout the switcher applies.
func (s *Switcher) Layout() *Layout { return s.l }
