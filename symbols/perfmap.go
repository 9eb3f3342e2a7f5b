package symbols

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// PerfMap is the symbol list a JIT compiler (node --perf-basic-prof, a JVM
// perf-map agent, LuaJIT, ...) writes to /tmp/perf-PID.map for code it
// generates into anonymous memory: one "START SIZE NAME" line per
// function, START and SIZE in hexadecimal (with or without 0x), NAME the
// rest of the line, spaces included. The file is appended to while the
// program runs; a later line for the same address wins. A PerfMap is
// immutable and safe for concurrent use.
//
// A map keeps the file's bytes it was parsed from and, per line, 24 bytes
// that point into them: a JIT's map runs to tens of MB, and a string and
// a line number per entry made a 64 MB map cost 330 MB.
type PerfMap struct {
	data    []byte          // the file; names are slices of it
	entries []perfMapRecord // by Start, then by line (latest last)
}

// perfMapRecord is one line of a perf map, its name at data[name:name+nameLen].
type perfMapRecord struct {
	Start, Size   uint64
	name, nameLen uint32
}

// PerfMapEntry is one line of a perf map.
type PerfMapEntry struct {
	Start, Size uint64
	Name        string
}

// PerfMapError reports a line of a perf map that is not "START SIZE NAME".
type PerfMapError struct {
	Line int // 1-based
	Msg  string
}

func (e *PerfMapError) Error() string {
	return fmt.Sprintf("symbols: perf map line %d: %s", e.Line, e.Msg)
}

// Bounds on untrusted perf maps.
const (
	maxPerfMapName    = 4096    // bytes of one name
	maxPerfMapEntries = 4 << 20 // lines kept
	perfMapOverlaps   = 64      // earlier entries a lookup looks back at
)

// ParsePerfMap parses a perf map. A last line without its newline is left
// out (the JIT may be writing it). Lines that do not parse are skipped;
// the first of them is returned as a *PerfMapError along with the map of
// the others, so one bad line does not lose a program's symbols. The map
// keeps data: the caller must not change it afterwards.
func ParsePerfMap(data []byte) (*PerfMap, error) {
	if len(data) > math.MaxUint32 {
		data = data[:math.MaxUint32] // what a record can point at; the cut line is "being written"
	}
	m := &PerfMap{data: data}
	m.entries = make([]perfMapRecord, 0, min(bytes.Count(data, []byte{'\n'}), maxPerfMapEntries))
	whole := data
	var firstErr error
	bad := func(line int, format string, args ...any) {
		if firstErr == nil {
			firstErr = &PerfMapError{Line: line, Msg: fmt.Sprintf(format, args...)}
		}
	}
	for line := 1; len(data) > 0; line++ {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break // being written
		}
		lineAt := len(whole) - len(data)
		text := bytes.TrimSuffix(data[:nl], []byte{'\r'})
		data = data[nl+1:]
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		if len(m.entries) >= maxPerfMapEntries {
			bad(line, "more than %d entries", maxPerfMapEntries)
			break
		}
		startField, rest, ok := bytes.Cut(text, []byte{' '})
		if !ok {
			bad(line, "want START SIZE NAME, got %q", truncate(text))
			continue
		}
		sizeField, name, ok := bytes.Cut(rest, []byte{' '})
		if !ok || len(name) == 0 {
			bad(line, "no name after START SIZE")
			continue
		}
		start, err := parseHex(startField)
		if err != nil {
			bad(line, "start %q: not hexadecimal", truncate(startField))
			continue
		}
		size, err := parseHex(sizeField)
		if err != nil {
			bad(line, "size %q: not hexadecimal", truncate(sizeField))
			continue
		}
		if size == 0 {
			continue
		}
		if start+size < start {
			bad(line, "range %#x+%#x wraps around", start, size)
			continue
		}
		if len(name) > maxPerfMapName {
			name = name[:maxPerfMapName]
		}
		at := lineAt + len(startField) + 1 + len(sizeField) + 1
		m.entries = append(m.entries, perfMapRecord{Start: start, Size: size, name: uint32(at), nameLen: uint32(len(name))})
	}
	// Stable: of entries with one start, the one written last stays last.
	slices.SortStableFunc(m.entries, func(a, b perfMapRecord) int { return cmp.Compare(a.Start, b.Start) })
	return m, firstErr
}

func (m *PerfMap) entry(r perfMapRecord) PerfMapEntry {
	return PerfMapEntry{Start: r.Start, Size: r.Size, Name: string(m.data[r.name : r.name+r.nameLen])}
}

func parseHex(b []byte) (uint64, error) {
	b = bytes.TrimPrefix(bytes.TrimPrefix(b, []byte("0x")), []byte("0X"))
	return strconv.ParseUint(string(b), 16, 64)
}

func truncate(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// Len is the number of entries.
func (m *PerfMap) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// Lookup returns the entry that covers addr: of overlapping ones (code
// freed and reused), the one starting last, and of those with the same
// start, the one written last.
func (m *PerfMap) Lookup(addr uint64) (PerfMapEntry, bool) {
	if m == nil {
		return PerfMapEntry{}, false
	}
	i, _ := slices.BinarySearchFunc(m.entries, addr+1, func(e perfMapRecord, a uint64) int {
		if e.Start < a {
			return -1
		}
		return 1
	})
	for j := i - 1; j >= 0 && j >= i-perfMapOverlaps; j-- {
		if e := m.entries[j]; addr-e.Start < e.Size {
			return m.entry(e), true
		}
	}
	return PerfMapEntry{}, false
}
