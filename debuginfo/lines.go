package debuginfo

import (
	"debug/dwarf"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
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
