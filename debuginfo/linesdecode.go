package debuginfo

// Decoding one compile unit for Lines, once, at its first lookup: its line
// table and its tree of functions and inlined calls.

import (
	"cmp"
	"debug/dwarf"
	"fmt"
	"io"
	"slices"
)

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
