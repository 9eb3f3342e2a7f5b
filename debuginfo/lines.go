package debuginfo

import (
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"codeberg.org/stacktop/stacktop/symbols"
)

// Frame is one source-level frame of a PC: a function, or a call inlined
// into one, with the file:line being executed in it.
type Frame struct {
	Function string // demangled as addr2line -C prints it; "" if DWARF names none
	File     string
	Line     int
	Inlined  bool // this call was inlined into the next (outer) frame
}

// AnswersVersion names the rules by which Lines, CallSites and GoTable answer:
// bump it with any change that gives a different answer (frames, names,
// lines, tail-call chains) from the same DWARF, so that answers kept from
// earlier runs (resolve's learned names, in the cache) are not used.
const AnswersVersion = 1

// ErrNoDWARF is returned by NewLines for objects without .debug_info.
var ErrNoDWARF = errors.New("debuginfo: no DWARF debugging information")

// Lines answers file:line and inline-chain queries for one object's DWARF.
// It is safe for concurrent use.
type Lines struct {
	d       *dwarf.Data // the whole DWARF; nil when lazy
	lazy    *lazyDWARF  // units read one by one; nil when d is set
	aranges *lazySection
	// units holds every compile unit PC range, sorted by start; maxEnd[i]
	// is the largest end among units[:i+1], so a backward scan can stop
	// as soon as no earlier range can reach the PC (ranges may overlap).
	units  []unitRange
	maxEnd []uint64

	mu  sync.Mutex // guards cus
	cus map[dwarf.Offset]*unitSlot
	// decodeMu serialises decoding (debug/dwarf's Data is not documented
	// as safe for concurrent use) and guards names.
	decodeMu sync.Mutex
	names    map[dwarf.Offset]string
	scopes   map[scopeKey]unitScopes // qualify.go's index of each unit
	decoded  atomic.Int64            // units decoded so far
	failed   atomic.Int64            // units (lines or call sites) that could not be read

	unitOffsOnce sync.Once
	unitOffs     []dwarf.Offset // sorted unit offsets, for qualify.go
}

// unitSlot is one unit's decoding: done is closed when cu is set.
type unitSlot struct {
	done chan struct{}
	cu   *unitInfo
}

type unitRange struct {
	lo, hi uint64
	cu     dwarf.Offset
}

// unitInfo is the decoded line table and scope tree of one compile unit.
type unitInfo struct {
	rows   []lineRow
	files  []string
	scopes []scope
	roots  []int32 // out-of-line subprograms
	err    error   // why the unit could not be decoded
}

type lineRow struct {
	addr uint64
	file int32
	line int32
	end  bool // end_sequence: no code at addr
}

// scope is a subprogram or inlined subroutine with code.
type scope struct {
	ranges   [][2]uint64
	name     string // from the DIE, its origin or its specification
	callFile int32  // inlined: the call site, in the caller
	callLine int32
	inlined  bool
	children []int32
}

func (s *scope) contains(pc uint64) bool {
	for _, r := range s.ranges {
		if pc >= r[0] && pc < r[1] {
			return true
		}
	}
	return false
}

// NewLines indexes the compile units of f's DWARF (f may be a separate
// debug file). With .debug_aranges (GCC writes it) that table is the
// index, and each unit's bytes are read, decompressed and decoded at its
// first lookup, so a few lookups in libc cost a few of its 2,000 units.
// Without it every unit's header and PC ranges are read here, which needs
// all of .debug_info.
func NewLines(f *elf.File) (l *Lines, err error) {
	return NewLinesCached(f, nil)
}

// NewLinesCached is NewLines with the decompressed sections kept in c
// (nil: no cache) from one run to the next; SaveCache writes what this
// run added.
func NewLinesCached(f *elf.File, c *Cache) (l *Lines, err error) {
	if f.Section(".debug_info") == nil && f.Section(".zdebug_info") == nil {
		return nil, ErrNoDWARF
	}
	if f.Section(".zdebug_info") == nil {
		if l, err := newLazyLines(f, c); l != nil || err != nil {
			return l, err
		}
	}
	var d *dwarf.Data
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = &FormatError{".debug_info", -1, fmt.Errorf("debug/dwarf panicked: %v", p)}
			}
		}()
		d, err = loadDWARF(f)
	}()
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &FormatError{".debug_info", -1, err}
	}
	return NewLinesFromDWARF(d)
}

// loadDWARF is f.DWARF() without what lines and inline frames never read
// (.debug_loclists, .debug_types), with the sections decompressed in
// parallel: decompression is nearly all of the cost (libc's debug file:
// about 0.2 s through f.DWARF()). Old GNU .zdebug_* sections go through
// f.DWARF(), which knows their framing.
func loadDWARF(f *elf.File) (*dwarf.Data, error) {
	return loadDWARFSections(f, true)
}

// LoadDWARFTypes is f's DWARF for reading its entries only (types, their
// members), without the line tables and ranges: what a reader of a Go
// program's runtime types needs (internal/gort), for a fraction of the
// decompression f.DWARF() does.
func LoadDWARFTypes(f *elf.File) (*dwarf.Data, error) {
	if f.Section(".debug_info") == nil && f.Section(".zdebug_info") == nil {
		return nil, errors.New("no .debug_info")
	}
	return loadDWARFSections(f, false)
}

func loadDWARFSections(f *elf.File, lines bool) (*dwarf.Data, error) {
	if f.Section(".zdebug_info") != nil {
		return f.DWARF()
	}
	names := []string{".debug_abbrev", ".debug_info", ".debug_str", ".debug_line", ".debug_ranges",
		".debug_line_str", ".debug_str_offsets", ".debug_addr", ".debug_rnglists"}
	data := make([][]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		sec := f.Section(name)
		if sec == nil || sec.Type == elf.SHT_NOBITS {
			continue
		}
		if !lines && (name == ".debug_line" || name == ".debug_ranges" || name == ".debug_rnglists") {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data[i], errs[i] = sec.Data()
			if errs[i] != nil {
				errs[i] = &FormatError{name, -1, errs[i]}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d, err := dwarf.New(data[0], nil, nil, data[1], data[3], nil, data[4], data[2])
	if err != nil {
		return nil, err
	}
	for i := 5; i < len(names); i++ {
		if data[i] != nil {
			if err := d.AddSection(names[i], data[i]); err != nil {
				return nil, &FormatError{names[i], -1, err}
			}
		}
	}
	return d, nil
}

// newLazyLines indexes f's units from .debug_aranges. It returns nil, nil
// when f has no usable .debug_aranges, for NewLines to read every unit.
func newLazyLines(f *elf.File, c *Cache) (*Lines, error) {
	s := newLazySection(f, ".debug_aranges")
	if !s.present() {
		return nil, nil
	}
	buildID := ""
	if c != nil {
		buildID = objectBuildID(f)
		s.useCache(c, buildID)
	}
	b, err := s.all()
	if err != nil {
		return nil, err
	}
	units, err := parseAranges(b, f.ByteOrder)
	if err != nil || len(units) == 0 {
		// A table we cannot read is no index; the units still are.
		return nil, nil
	}
	l := &Lines{lazy: newLazyDWARF(f, c, buildID), aranges: s, units: units, cus: map[dwarf.Offset]*unitSlot{}, names: map[dwarf.Offset]string{}}
	l.sortUnits()
	return l, nil
}

// NewLinesFromDWARF indexes d's compile units by PC range.
func NewLinesFromDWARF(d *dwarf.Data) (l *Lines, err error) {
	l = &Lines{d: d, cus: map[dwarf.Offset]*unitSlot{}, names: map[dwarf.Offset]string{}}
	defer func() {
		if p := recover(); p != nil {
			l, err = nil, &FormatError{".debug_info", -1, fmt.Errorf("debug/dwarf panicked: %v", p)}
		}
	}()
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, &FormatError{".debug_info", -1, err}
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			ranges, err := d.Ranges(e)
			if err != nil {
				// One unit with bad ranges costs its lines, not the
				// whole object's.
				ranges = nil
			}
			for _, rg := range ranges {
				if rg[0] < rg[1] {
					l.units = append(l.units, unitRange{rg[0], rg[1], e.Offset})
				}
			}
		}
		r.SkipChildren()
	}
	l.sortUnits()
	return l, nil
}

func (l *Lines) sortUnits() {
	slices.SortFunc(l.units, func(a, b unitRange) int { return cmp.Compare(a.lo, b.lo) })
	l.maxEnd = make([]uint64, len(l.units))
	var m uint64
	for i, u := range l.units {
		m = max(m, u.hi)
		l.maxEnd[i] = m
	}
}

// SaveCache writes to the cache given to NewLinesCached the section bytes
// this run decompressed beyond what the cache held. Errors cost the next
// run time, not answers: callers may ignore them.
func (l *Lines) SaveCache() error {
	if l.lazy == nil {
		return nil
	}
	var errs []error
	for _, s := range append(l.lazy.sections(), l.aranges) {
		errs = append(errs, s.saveCache())
	}
	return errors.Join(errs...)
}

// Failures counts the units whose line tables, scopes or call sites could
// not be read, and the other units a name or a call's target was to be
// read from but could not (a corrupt unit, or a read of the file that
// failed). An
// answer given after a failure may lack what that unit held: callers that
// keep answers beyond this run (resolve's learned names) keep none then.
func (l *Lines) Failures() int64 { return l.failed.Load() }

// Decoded counts the units decoded so far: a caller that saw FramesNoWait
// say "not ready" need not ask again before it changes.
func (l *Lines) Decoded() int64 { return l.decoded.Load() }

// Units is the number of compile unit ranges indexed.
func (l *Lines) Units() int { return len(l.units) }

// Frames appends to dst the source frames of pc (an ELF virtual address of
// the object), innermost first: each inlined call (Inlined true) then the
// containing function. It returns dst unchanged if no unit covers pc.
func (l *Lines) Frames(pc uint64, dst []Frame) ([]Frame, error) {
	dst, _, err := l.frames(pc, dst, true)
	return dst, err
}

// FramesNoWait is Frames for callers that must not wait for a unit to be
// read: if pc's unit is not decoded yet, it starts decoding it on a
// goroutine of its own and returns dst and ready false; a later call
// gives the frames. The frames are the same as Frames', whenever asked.
func (l *Lines) FramesNoWait(pc uint64, dst []Frame) (frames []Frame, ready bool, err error) {
	return l.frames(pc, dst, false)
}

func (l *Lines) frames(pc uint64, dst []Frame, wait bool) ([]Frame, bool, error) {
	i := sort.Search(len(l.units), func(i int) bool { return l.units[i].lo > pc }) - 1
	for ; i >= 0 && l.maxEnd[i] > pc; i-- {
		u := l.units[i]
		if pc < u.lo || pc >= u.hi {
			continue
		}
		cu, ok := l.unit(u.cu, wait)
		if !ok {
			return dst, false, nil
		}
		if cu.err != nil {
			return dst, true, cu.err
		}
		n := len(dst)
		dst = l.framesIn(cu, pc, dst)
		if len(dst) > n {
			return dst, true, nil
		}
	}
	return dst, true, nil
}

// framesIn builds the chain of pc inside one unit.
func (l *Lines) framesIn(cu *unitInfo, pc uint64, dst []Frame) []Frame {
	file, line, haveLine := cu.lineAt(pc)
	// chain: outermost subprogram first, then each inlined call inside.
	var chain [16]int32
	chainLen := 0
	level := cu.roots
	for chainLen < len(chain) {
		next := int32(-1)
		for _, c := range level {
			if cu.scopes[c].contains(pc) {
				next = c
				break
			}
		}
		if next < 0 {
			break
		}
		chain[chainLen] = next
		chainLen++
		level = cu.scopes[next].children
	}
	if chainLen == 0 {
		if haveLine {
			dst = append(dst, Frame{File: file, Line: line})
		}
		return dst
	}
	// The innermost scope runs the line-table position; each scope's
	// caller runs at that scope's call site.
	for k := chainLen - 1; k >= 0; k-- {
		s := &cu.scopes[chain[k]]
		f := Frame{Function: s.name, Inlined: s.inlined}
		if haveLine {
			f.File, f.Line = file, line
		}
		dst = append(dst, f)
		file, line, haveLine = cu.fileName(s.callFile), int(s.callLine), s.inlined
	}
	return dst
}

func (cu *unitInfo) fileName(i int32) string {
	if i >= 0 && int(i) < len(cu.files) {
		return cu.files[i]
	}
	return ""
}

// lineAt finds the row covering pc: the last row at or below pc, unless
// that row ends a sequence.
func (cu *unitInfo) lineAt(pc uint64) (string, int, bool) {
	i := sort.Search(len(cu.rows), func(i int) bool { return cu.rows[i].addr > pc }) - 1
	if i < 0 || cu.rows[i].end {
		return "", 0, false
	}
	r := cu.rows[i]
	return cu.fileName(r.file), int(r.line), true
}

// unit returns the decoded unit at off, decoding it once.
// With wait false it never blocks: a unit not decoded yet is started on a
// goroutine and ok is false.
func (l *Lines) unit(off dwarf.Offset, wait bool) (cu *unitInfo, ok bool) {
	l.mu.Lock()
	s := l.cus[off]
	first := s == nil
	if first {
		s = &unitSlot{done: make(chan struct{})}
		l.cus[off] = s
	}
	l.mu.Unlock()
	if first {
		if !wait {
			go l.decode(off, s)
			return nil, false
		}
		l.decode(off, s)
	}
	if wait {
		<-s.done
		return s.cu, true
	}
	select {
	case <-s.done:
		return s.cu, true
	default:
		return nil, false
	}
}

func (l *Lines) decode(off dwarf.Offset, s *unitSlot) {
	l.decodeMu.Lock()
	defer l.decodeMu.Unlock()
	defer l.decoded.Add(1)
	defer close(s.done)
	defer func() {
		if p := recover(); p != nil {
			s.cu = &unitInfo{err: &FormatError{".debug_info", int64(off), fmt.Errorf("debug/dwarf panicked: %v", p)}}
		}
		if s.cu != nil && s.cu.err != nil {
			l.failed.Add(1)
		}
	}()
	if l.lazy != nil {
		s.cu = l.decodeLazy(off)
	} else {
		s.cu = decodeUnit(l.d, off, func(die dwarf.Offset) string { return l.name(die, l.wholeData) })
	}
}

// decodeLazy decodes the unit at off from its own image. Names are
// resolved while the image exists; a reference into another unit opens
// that one's image for the time of the lookup.
func (l *Lines) decodeLazy(off dwarf.Offset) *unitInfo {
	u, err := l.lazy.open(uint64(off), true)
	if err != nil {
		return &unitInfo{err: err}
	}
	defer u.free()
	var others []*openedUnit
	defer func() {
		for _, o := range others {
			o.free()
		}
	}()
	dataAt := func(die dwarf.Offset) (*dwarf.Data, dwarf.Offset) {
		if uint64(die) >= u.h.start && uint64(die) < u.h.end {
			return u.d, dwarf.Offset(u.h.dieOff)
		}
		for _, o := range others {
			if uint64(die) >= o.h.start && uint64(die) < o.h.end {
				return o.d, dwarf.Offset(o.h.dieOff)
			}
		}
		start, err := l.lazy.unitAt(uint64(die))
		if err != nil {
			l.failed.Add(1) // a function's name is lost
			return nil, 0
		}
		o, err := l.lazy.open(start, false)
		if err != nil {
			l.failed.Add(1)
			return nil, 0
		}
		others = append(others, o)
		return o.d, dwarf.Offset(o.h.dieOff)
	}
	return decodeUnit(u.d, dwarf.Offset(u.h.dieOff), func(die dwarf.Offset) string { return l.name(die, dataAt) })
}

// wholeData is dataAt for the whole-file index: every DIE is in l.d, in
// the indexed unit that starts last before it.
func (l *Lines) wholeData(die dwarf.Offset) (*dwarf.Data, dwarf.Offset) {
	cu, _ := l.unitOf(die)
	return l.d, cu
}

// codeFreeTags are DIEs whose children never hold code: skipping them
// saves most of a C++ unit's walk.
var codeFreeTags = map[dwarf.Tag]bool{
	dwarf.TagStructType: true, dwarf.TagClassType: true, dwarf.TagUnionType: true,
	dwarf.TagEnumerationType: true, dwarf.TagSubroutineType: true,
	dwarf.TagFormalParameter: true, dwarf.TagVariable: true,
	dwarf.TagTemplateTypeParameter: true, dwarf.TagCallSite: true, dwarf.Tag(0x4109): true, // DW_TAG_GNU_call_site,
}

// decodeUnit decodes the unit at off of d: its line table and its tree of
// functions and inlined calls, each named by name.
func decodeUnit(d *dwarf.Data, off dwarf.Offset, name func(dwarf.Offset) string) (cu *unitInfo) {
	cu = &unitInfo{}
	defer func() {
		if p := recover(); p != nil {
			cu = &unitInfo{err: &FormatError{".debug_info", int64(off), fmt.Errorf("debug/dwarf panicked: %v", p)}}
		}
	}()
	r := d.Reader()
	r.Seek(off)
	top, err := r.Next()
	if err != nil || top == nil {
		cu.err = &FormatError{".debug_info", int64(off), fmt.Errorf("reading compile unit: %v", err)}
		return cu
	}
	if err := cu.readLines(d, top); err != nil {
		cu.err = &FormatError{".debug_line", -1, fmt.Errorf("unit at %#x: %w", off, err)}
		return cu
	}
	if !top.Children {
		return cu
	}
	// parents[k] is the scope enclosing depth k's DIEs, -1 for none.
	parents := []int32{-1}
	for len(parents) > 0 {
		e, err := r.Next()
		if err != nil {
			cu.err = &FormatError{".debug_info", int64(off), err}
			return cu
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			parents = parents[:len(parents)-1]
			continue
		}
		parent := parents[len(parents)-1]
		if codeFreeTags[e.Tag] {
			r.SkipChildren()
			continue
		}
		enclosing := parent
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine {
			inlined := e.Tag == dwarf.TagInlinedSubroutine
			ranges, _ := d.Ranges(e)
			if len(ranges) > 0 && (!inlined || parent >= 0) {
				s := scope{ranges: ranges, name: name(e.Offset), inlined: inlined, callFile: -1}
				if inlined {
					if v, ok := e.Val(dwarf.AttrCallFile).(int64); ok {
						s.callFile = int32(v)
					}
					if v, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
						s.callLine = int32(v)
					}
				}
				idx := int32(len(cu.scopes))
				cu.scopes = append(cu.scopes, s)
				if inlined {
					cu.scopes[parent].children = append(cu.scopes[parent].children, idx)
				} else {
					// A nested function (GNU C) is called, not inlined:
					// its chain starts afresh.
					cu.roots = append(cu.roots, idx)
				}
				enclosing = idx
			}
		}
		if e.Children {
			parents = append(parents, enclosing)
		}
	}
	return cu
}

// readLines decodes the unit's line table into sorted rows.
func (cu *unitInfo) readLines(d *dwarf.Data, top *dwarf.Entry) error {
	lr, err := d.LineReader(top)
	if err != nil {
		return err
	}
	if lr == nil {
		return nil // a unit without a line table
	}
	fileIndex := map[*dwarf.LineFile]int32{}
	for i, f := range lr.Files() {
		if f != nil {
			fileIndex[f] = int32(i)
		}
		name := ""
		if f != nil {
			name = f.Name
		}
		cu.files = append(cu.files, name)
	}
	var e dwarf.LineEntry
	for {
		if err := lr.Next(&e); err != nil {
			if err == io.EOF {
				break
			}
			return err
		}
		fi, ok := fileIndex[e.File]
		if !ok {
			// Files can be defined by DW_LNE_define_file mid-table.
			fi = -1
			for i, f := range lr.Files() {
				if f == e.File {
					fi = int32(i)
				}
			}
			if fi < 0 && e.File != nil {
				fi = int32(len(cu.files))
				cu.files = append(cu.files, e.File.Name)
			}
			if e.File != nil {
				fileIndex[e.File] = fi
			}
		}
		cu.rows = append(cu.rows, lineRow{addr: e.Address, file: fi, line: int32(e.Line), end: e.EndSequence})
	}
	// Within one address, an end_sequence goes first: it closes the
	// previous sequence, while a row at the same address starts the
	// next. Rows at one address otherwise keep table order and the last
	// one wins, as in addr2line.
	slices.SortStableFunc(cu.rows, func(a, b lineRow) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(b2i(!a.end), b2i(!b.end))
	})
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// name returns the display name of the function a scope DIE stands for:
// the demangled linkage name if it or its abstract origin or
// specification has one, else the first DW_AT_name found, as addr2line -C
// prints it. dataAt gives the dwarf.Data that holds a DIE and the offset
// of its unit's entry (for qualify.go). Called with
// l.decodeMu held, while a unit is decoded.
func (l *Lines) name(off dwarf.Offset, dataAt func(dwarf.Offset) (*dwarf.Data, dwarf.Offset)) string {
	if n, ok := l.names[off]; ok {
		return n
	}
	n := l.resolveName(off, dataAt)
	l.names[off] = n
	return n
}

func (l *Lines) resolveName(off dwarf.Offset, dataAt func(dwarf.Offset) (*dwarf.Data, dwarf.Offset)) (name string) {
	defer func() {
		if recover() != nil {
			name = ""
		}
	}()
	plain, plainOff := "", dwarf.Offset(0)
	var plainData *dwarf.Data
	var plainCU dwarf.Offset
	// Origins and specifications chain at most a few deep; the bound
	// stops a reference cycle in corrupt input.
	for hop := 0; hop < 8; hop++ {
		d, cu := dataAt(off)
		if d == nil {
			break
		}
		r := d.Reader()
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		for _, a := range []dwarf.Attr{dwarf.AttrLinkageName, mipsLinkageName} {
			if s, ok := e.Val(a).(string); ok && s != "" {
				return symbols.Demangle(s)
			}
		}
		if s, ok := e.Val(dwarf.AttrName).(string); ok && plain == "" {
			plain, plainOff, plainData, plainCU = s, e.Offset, d, cu
		}
		next, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			next, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok {
			break
		}
		off = next
	}
	return l.qualify(plainData, plainCU, plainOff, plain) // qualify.go: C++ namespaces and classes
}

// mipsLinkageName is DW_AT_MIPS_linkage_name, which older GCCs and some
// compilers still emit instead of DW_AT_linkage_name.
const mipsLinkageName = dwarf.Attr(0x2007)
