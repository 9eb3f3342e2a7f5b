package symbols

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
)

// Symbol is one named code range of an ELF object, in ELF virtual
// addresses (runtime address minus the load bias).
type Symbol struct {
	Name  string // demangled, for display (equals Raw when not mangled)
	Raw   string // as stored in the symbol table; "puts@plt" for PLT entries
	Start uint64
	Size  uint64 // never 0 in a Table: size-0 symbols are extended or dropped
}

// End is one past the symbol's last byte.
func (s Symbol) End() uint64 { return s.Start + s.Size }

// Contains reports whether vaddr lies in [Start, Start+Size).
func (s Symbol) Contains(vaddr uint64) bool { return vaddr >= s.Start && vaddr-s.Start < s.Size }

// FormatError reports an ELF object whose symbol data could not be decoded.
type FormatError struct {
	Section string // the section (or header) being decoded, e.g. ".symtab"
	Err     error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("symbols: decoding %s: %v", e.Section, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Table maps ELF virtual addresses of one object to function symbols. It
// is immutable after Load and safe for concurrent use.
type Table struct {
	// starts mirrors syms[i].Start so the binary search walks a dense
	// []uint64 instead of 48-byte Symbols.
	starts []uint64
	syms   []Symbol
	// parent[i] is the largest j < i whose range contains syms[i].Start, or
	// -1. Only sized symbols can enclose later ones (a function with a
	// nested sized label); following parent from the candidate found by
	// the binary search finds the innermost enclosing symbol.
	parent []int32
	// Demangling costs tens of microseconds per C++ name, and a profile
	// touches few of a library's symbols, so mangled names are demangled
	// on first use: syms[i].Name is "" until then and demangled[i] caches
	// the result. Racing first uses both compute the same string.
	demangled []atomic.Pointer[string]
}

// symbol returns syms[i] with its display name.
func (t *Table) symbol(i int) Symbol {
	s := t.syms[i]
	if s.Name == "" {
		if p := t.demangled[i].Load(); p != nil {
			s.Name = *p
		} else {
			name := displayName(s.Raw)
			t.demangled[i].Store(&name)
			s.Name = name
		}
	}
	return s
}

// mangled reports whether raw may change when demangled; raw "x@plt"
// counts when x does.
func mangled(raw string) bool {
	raw = strings.TrimSuffix(raw, "@plt")
	return strings.HasPrefix(raw, "_Z") || strings.HasPrefix(raw, "_R")
}

// displayName demangles raw, or the x of a PLT name "x@plt".
func displayName(raw string) string {
	if d := Demangle(raw); d != raw && d != "" {
		return d
	}
	if base, ok := strings.CutSuffix(raw, "@plt"); ok {
		if d := Demangle(base); d != base && d != "" {
			return d + "@plt"
		}
	}
	return raw
}

// Len is the number of symbols in the table.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.syms)
}

// All yields the table's symbols in ascending Start order.
func (t *Table) All() iter.Seq[Symbol] {
	return func(yield func(Symbol) bool) {
		if t == nil {
			return
		}
		for i := range t.syms {
			if !yield(t.symbol(i)) {
				return
			}
		}
	}
}

// Lookup returns the innermost symbol whose range contains vaddr, an ELF
// virtual address. It does not allocate, except to demangle a C++ or
// Rust name the first time it is returned.
func (t *Table) Lookup(vaddr uint64) (Symbol, bool) {
	if t == nil {
		return Symbol{}, false
	}
	// lo becomes the number of symbols starting at or below vaddr.
	lo, hi := 0, len(t.starts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.starts[m] <= vaddr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for i := lo - 1; i >= 0; i = int(t.parent[i]) {
		if s := &t.syms[i]; vaddr-s.Start < s.Size {
			return t.symbol(i), true
		}
	}
	return Symbol{}, false
}

// Preceding returns the symbol that starts last at or below vaddr, whether
// or not its range covers vaddr: for an address no symbol covers (code of
// a stripped object), the nearest name before it, a hint for the reader
// and nothing more.
func (t *Table) Preceding(vaddr uint64) (Symbol, bool) {
	if t == nil {
		return Symbol{}, false
	}
	i, _ := slices.BinarySearch(t.starts, vaddr+1)
	if i == 0 {
		return Symbol{}, false
	}
	return t.symbol(i - 1), true
}

// loadReaderAt parses the ELF object in r and loads its symbols. Unlike
// elf.NewFile it never panics on corrupt input.
func loadReaderAt(r io.ReaderAt) (t *Table, err error) {
	var f *elf.File
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = &FormatError{Section: "ELF headers", Err: fmt.Errorf("debug/elf panicked: %v", p)}
			}
		}()
		f, err = elf.NewFile(r)
	}()
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &FormatError{Section: "ELF headers", Err: err}
	}
	return Load(f)
}

// Symbol types this package cares about that debug/elf does not name.
const (
	sttGNUIFunc  = elf.SymType(10) // STT_GNU_IFUNC (STT_LOOS)
	stbGNUUnique = elf.SymBind(10) // STB_GNU_UNIQUE (STB_LOOS)
)

// candidate is a symbol-table entry that passed the kind filter, before
// same-address aliases are resolved and size-0 symbols extended.
type candidate struct {
	raw    string
	value  uint64
	size   uint64
	limit  uint64 // a size-0 symbol may extend up to here (its section's end)
	bind   elf.SymBind
	isFunc bool // STT_FUNC, STT_GNU_IFUNC or a synthesised PLT entry
	ifunc  bool // STT_GNU_IFUNC: its value is the resolver's code
}

// Load builds the function table of f from .symtab, .dynsym and the PLT
// sections. The caller owns f and may close it afterwards: the Table keeps
// no reference to it.
//
// Kept are STT_FUNC and STT_GNU_IFUNC symbols, and STT_NOTYPE symbols
// (assembly labels) that are global/weak or have a size, all only when
// defined in an executable section. When several symbols share an address
// one is kept, chosen by (in order): non-zero size, function type, not
// STT_GNU_IFUNC (that address is the resolver's code), binding
// GLOBAL over WEAK over LOCAL, fewer leading underscores, shorter name,
// byte order of the name. A size-0 symbol is extended to the next kept
// symbol's start but not past the end of its section; if that leaves it
// empty it is dropped.
//
// A missing .symtab or .dynsym is not an error (stripped objects are the
// common case); a corrupt one is, reported as a *FormatError naming it.
func Load(f *elf.File) (t *Table, err error) {
	stage := "ELF sections"
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, &FormatError{Section: stage, Err: fmt.Errorf("debug/elf panicked: %v", p)}
		}
	}()

	cands, err := loadCandidates(f, &stage)
	if err != nil {
		return nil, err
	}
	stage = "symbol table"
	return build(cands), nil
}

// loadCandidates collects the candidates of f's .symtab, .dynsym and PLT.
// *stage names the section being decoded, for the caller's recover.
func loadCandidates(f *elf.File, stage *string) ([]candidate, error) {
	var cands []candidate
	*stage = ".symtab"
	cands, err := appendSymtab(cands, f, false)
	if err != nil {
		return nil, &FormatError{Section: *stage, Err: err}
	}

	*stage = ".dynsym"
	dynsyms, err := f.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, &FormatError{Section: *stage, Err: err}
	}
	cands = appendCandidates(cands, f, dynsyms, false)

	*stage = "PLT"
	plt, err := pltCandidates(f, dynsyms, stage)
	if err != nil {
		return nil, &FormatError{Section: *stage, Err: err}
	}
	return append(cands, plt...), nil
}

// LoadWithDebug is Load with the .symtab of each debug file merged in: a
// separate debug file (found by build ID or .gnu_debuglink) or the ELF
// image of MiniDebugInfo (.gnu_debugdata). They add the local functions a
// stripped object lacks (libc's start_thread, clone3). Their addresses
// must be the object's own virtual addresses, as they are for files made
// by objcopy --only-keep-debug. Names from all tables compete as aliases
// by the same preference as in Load. A corrupt debug file is reported
// as a *FormatError naming its .symtab; the caller may fall back to Load.
func LoadWithDebug(f *elf.File, debug ...*elf.File) (t *Table, err error) {
	stage := "ELF sections"
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, &FormatError{Section: stage, Err: fmt.Errorf("debug/elf panicked: %v", p)}
		}
	}()
	base, err := loadCandidates(f, &stage)
	if err != nil {
		return nil, err
	}
	for i, d := range debug {
		if d == nil {
			continue
		}
		stage = fmt.Sprintf("debug file %d .symtab", i)
		if base, err = appendSymtab(base, d, true); err != nil {
			return nil, &FormatError{Section: stage, Err: err}
		}
	}
	stage = "symbol table"
	return build(base), nil
}

// appendCandidates filters syms of f. noBits accepts symbols in SHT_NOBITS
// sections: a separate debug file keeps the section headers of its object
// but not the code, so its .text is NOBITS.
func appendCandidates(dst []candidate, f *elf.File, syms []elf.Symbol, noBits bool) []candidate {
	dst = slices.Grow(dst, len(syms))
	for i := range syms {
		s := &syms[i]
		if s.Name == "" {
			continue
		}
		if c, ok := candidateOf(f, s, noBits); ok {
			c.raw = s.Name
			dst = append(dst, c)
		}
	}
	return dst
}

// candidateOf is s as a candidate (without its name), if it is one.
func candidateOf(f *elf.File, s *elf.Symbol, noBits bool) (candidate, bool) {
	typ := elf.ST_TYPE(s.Info)
	bind := elf.ST_BIND(s.Info)
	isFunc := typ == elf.STT_FUNC || typ == sttGNUIFunc
	switch {
	case isFunc:
	case typ == elf.STT_NOTYPE:
		// Assembly labels: keep those meant to be seen (global) or
		// that describe a range (sized). Local size-0 labels are
		// branch targets inside functions (.L*, $x mapping symbols).
		if s.Size == 0 && bind != elf.STB_GLOBAL && bind != elf.STB_WEAK {
			return candidate{}, false
		}
	default:
		return candidate{}, false
	}
	if s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(f.Sections) {
		return candidate{}, false
	}
	sec := f.Sections[s.Section]
	if sec.Flags&elf.SHF_EXECINSTR == 0 || sec.Type == elf.SHT_NOBITS && !noBits {
		return candidate{}, false
	}
	value := s.Value
	if f.Machine == elf.EM_ARM {
		value &^= 1 // Thumb bit
	}
	limit := value // no extension when the symbol lies outside its section
	if end := sec.Addr + sec.Size; value >= sec.Addr && value < end {
		limit = end
	}
	return candidate{
		value: value, size: s.Size, limit: limit,
		bind: bind, isFunc: isFunc, ifunc: typ == sttGNUIFunc,
	}, true
}

func bindRank(b elf.SymBind) int {
	switch b {
	case elf.STB_GLOBAL, stbGNUUnique:
		return 0
	case elf.STB_WEAK:
		return 1
	}
	return 2
}

func leadingUnderscores(s string) int {
	n := 0
	for n < len(s) && s[n] == '_' {
		n++
	}
	return n
}

// comparePreference orders aliases at one address, best first.
func comparePreference(a, b *candidate) int {
	if c := cmp.Compare(b2i(a.size == 0), b2i(b.size == 0)); c != 0 {
		return c
	}
	if c := cmp.Compare(b2i(!a.isFunc), b2i(!b.isFunc)); c != 0 {
		return c
	}
	// An IFUNC symbol's address is its resolver: the resolver's own
	// symbol names that code better than the function it picks.
	if c := cmp.Compare(b2i(a.ifunc), b2i(b.ifunc)); c != 0 {
		return c
	}
	if c := cmp.Compare(bindRank(a.bind), bindRank(b.bind)); c != 0 {
		return c
	}
	if c := cmp.Compare(leadingUnderscores(a.raw), leadingUnderscores(b.raw)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(a.raw), len(b.raw)); c != 0 {
		return c
	}
	return strings.Compare(a.raw, b.raw)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// build resolves aliases, extends size-0 symbols and indexes the result.
func build(cands []candidate) *Table {
	// Sorted by address through 16-byte keys, not the 48-byte candidates
	// with the preference in the comparison: that sort was half the
	// time of loading libc's symbols (13,000 candidates, most of them
	// with an alias or a .symtab/.dynsym twin).
	type key struct {
		value uint64
		i     int32
	}
	keys := make([]key, len(cands))
	for i := range cands {
		keys[i] = key{cands[i].value, int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.value, b.value); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	// One symbol per address, the preferred one of those there. This
	// also removes the .symtab/.dynsym duplicates.
	unique := 0
	for j := range keys {
		if j == 0 || keys[j].value != keys[j-1].value {
			unique++
		}
	}
	kept := make([]candidate, 0, unique)
	for j := 0; j < len(keys); {
		best := &cands[keys[j].i]
		k := j + 1
		for ; k < len(keys) && keys[k].value == keys[j].value; k++ {
			if c := &cands[keys[k].i]; comparePreference(c, best) < 0 {
				best = c
			}
		}
		kept = append(kept, *best)
		j = k
	}

	t := &Table{
		starts: make([]uint64, 0, len(kept)),
		syms:   make([]Symbol, 0, len(kept)),
	}
	for i := range kept {
		c := &kept[i]
		size := c.size
		if size == 0 {
			end := c.limit
			if i+1 < len(kept) && kept[i+1].value < end {
				end = kept[i+1].value
			}
			size = end - c.value // limit >= value by construction
		}
		if size == 0 {
			continue
		}
		if c.value+size < c.value { // corrupt size: clamp at the top of the address space
			size = ^uint64(0) - c.value
			if size == 0 {
				continue
			}
		}
		t.starts = append(t.starts, c.value)
		name := c.raw
		if mangled(c.raw) {
			name = "" // demangled on first use
		}
		t.syms = append(t.syms, Symbol{Name: name, Raw: c.raw, Start: c.value, Size: size})
	}

	t.demangled = make([]atomic.Pointer[string], len(t.syms))
	t.linkParents()
	return t
}

// linkParents sets parent from syms (sorted by start): for each symbol,
// the innermost earlier one that encloses its start.
func (t *Table) linkParents() {
	t.parent = make([]int32, len(t.syms))
	var open []int32 // candidates for enclosing later symbols
	for i := range t.syms {
		start := t.syms[i].Start
		for len(open) > 0 && !t.syms[open[len(open)-1]].Contains(start) {
			open = open[:len(open)-1]
		}
		t.parent[i] = -1
		if len(open) > 0 {
			t.parent[i] = open[len(open)-1]
		}
		open = append(open, int32(i))
	}
}
