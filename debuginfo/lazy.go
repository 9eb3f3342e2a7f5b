package debuginfo

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// lazyDWARF reads one compile unit at a time out of an object's DWARF
// sections, decompressing them only as far as the units asked for.
//
// debug/dwarf wants whole sections, and dwarf.New reads every unit's
// header and abbreviation table (libc's debug file: 2,000 units, tens of
// milliseconds, after decompressing 6 MB of .debug_info). So each unit is
// opened on its own: a .debug_info image is made with the unit's bytes at
// their real offset and, before them, one padding unit that covers
// everything else. Offsets (DIE references, DW_FORM_ref_addr) keep their
// meaning and dwarf.New sees two units. The image's pages other than the
// two headers and the unit itself are never touched: it is an anonymous
// mapping, freed once the unit is decoded.
type lazyDWARF struct {
	order binary.ByteOrder
	// Read as far as the units decoded so far reach.
	info, abbrev, line *lazySection
	// Read whole at the first unit: small, and referenced from anywhere.
	whole   []*lazySection // str, ranges, then the rest of wholeSections
	wholeMu sync.Mutex
	loaded  [][]byte

	// stmts holds each opened unit's line program offset (DW_AT_stmt_list,
	// -1 for none): the lines of a unit whose call sites were read (or
	// the other way round) need one dwarf.New, not two.
	stmtMu sync.Mutex
	stmts  map[uint64]int64
}

// The sections read whole; the first two are dwarf.New's str and ranges.
var wholeSections = []string{".debug_str", ".debug_ranges", ".debug_line_str", ".debug_str_offsets", ".debug_addr", ".debug_rnglists"}

func newLazyDWARF(f *elf.File, c *Cache, buildID string) *lazyDWARF {
	z := &lazyDWARF{
		order:  f.ByteOrder,
		info:   newLazySection(f, ".debug_info"),
		abbrev: newLazySection(f, ".debug_abbrev"),
		line:   newLazySection(f, ".debug_line"),
	}
	for _, name := range wholeSections {
		z.whole = append(z.whole, newLazySection(f, name))
	}
	for _, s := range z.sections() {
		s.useCache(c, buildID)
	}
	return z
}

func (z *lazyDWARF) sections() []*lazySection {
	return append([]*lazySection{z.info, z.abbrev, z.line}, z.whole...)
}

func (z *lazyDWARF) wholeData() ([][]byte, error) {
	z.wholeMu.Lock()
	defer z.wholeMu.Unlock()
	if z.loaded != nil {
		return z.loaded, nil
	}
	out := make([][]byte, len(z.whole))
	for i, s := range z.whole {
		b, err := s.all()
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	z.loaded = out
	return out, nil
}

// unitHeader is what the first bytes of a unit say.
type unitHeader struct {
	start, end uint64 // the unit, header included, in .debug_info
	dieOff     uint64 // its first DIE
	vers       int
	is64       bool
	asize      uint8
	abbrevOff  uint64
}

// header reads the unit header at off.
func (z *lazyDWARF) header(off uint64) (unitHeader, error) {
	h := unitHeader{start: off}
	b, err := z.info.at(off, 4)
	if err != nil {
		return h, err
	}
	length, hlen := uint64(z.order.Uint32(b)), uint64(4)
	if length == 0xffffffff {
		if b, err = z.info.at(off+4, 8); err != nil {
			return h, err
		}
		length, hlen, h.is64 = z.order.Uint64(b), 12, true
	} else if length >= 0xfffffff0 {
		return h, &FormatError{".debug_info", int64(off), fmt.Errorf("reserved unit length %#x", length)}
	}
	h.end = off + hlen + length
	if h.end < off || length > 1<<32 {
		return h, &FormatError{".debug_info", int64(off), fmt.Errorf("unit length %#x out of range", length)}
	}
	offSize := uint64(4)
	if h.is64 {
		offSize = 8
	}
	b, err = z.info.at(off+hlen, 4+offSize)
	if err != nil {
		return h, err
	}
	h.vers = int(z.order.Uint16(b))
	if h.vers < 2 || h.vers > 5 {
		return h, &FormatError{".debug_info", int64(off + hlen), fmt.Errorf("unsupported DWARF version %d", h.vers)}
	}
	p := b[2:]
	if h.vers >= 5 {
		h.asize = p[1]
		p = p[2:]
	}
	if h.is64 {
		h.abbrevOff = z.order.Uint64(p)
	} else {
		h.abbrevOff = uint64(z.order.Uint32(p))
	}
	h.dieOff = off + hlen + 2 + offSize + 1
	if h.vers >= 5 {
		h.dieOff++
		switch b[2] { // unit type
		case 4, 5: // skeleton, split compile: unit ID
			h.dieOff += 8
		case 2, 6: // type, split type: signature, type offset
			h.dieOff += 8 + offSize
		}
	} else {
		h.asize = p[offSize]
	}
	if h.dieOff > h.end {
		return h, &FormatError{".debug_info", int64(off), errors.New("unit shorter than its header")}
	}
	return h, nil
}

// padding writes at b[0:] the header of a unit that spans all of b, in
// the version and address size of h, sharing h's abbreviation table.
func (z *lazyDWARF) padding(b []byte, h unitHeader) error {
	n := uint64(len(b))
	hdr := uint64(4 + 2 + 4 + 1)
	if h.vers >= 5 {
		hdr++
	}
	if n < hdr || n-4 >= 0xfffffff0 || h.abbrevOff > 0xffffffff {
		return &FormatError{".debug_info", int64(h.start), errors.New("no room for the unit's image")}
	}
	o := z.order
	o.PutUint32(b, uint32(n-4))
	o.PutUint16(b[4:], uint16(h.vers))
	if h.vers >= 5 {
		b[6], b[7] = 1, h.asize // DW_UT_compile
		o.PutUint32(b[8:], uint32(h.abbrevOff))
	} else {
		o.PutUint32(b[6:], uint32(h.abbrevOff))
		b[10] = h.asize
	}
	return nil
}

// openedUnit is a dwarf.Data that holds one unit; free releases its image.
type openedUnit struct {
	d    *dwarf.Data
	h    unitHeader
	free func()
}

// open makes the dwarf.Data of the unit at off, with its line program if
// lines is set (call sites and names need none).
//
// dwarf.New takes the line section up front, and where the unit's line
// program is comes from the unit's first DIE: so a unit is opened once
// without, to read that DIE, and, for lines, again with the program,
// unless an earlier open of the unit left its offset in z.stmts.
func (z *lazyDWARF) open(off uint64, lines bool) (*openedUnit, error) {
	h, err := z.header(off)
	if err != nil {
		return nil, err
	}
	unitBytes, err := z.info.at(h.start, h.end-h.start)
	if err != nil {
		return nil, err
	}
	whole, err := z.wholeData()
	if err != nil {
		return nil, err
	}
	img, free, err := imageBuffer(h.end)
	if err != nil {
		return nil, err
	}
	copy(img[h.start:], unitBytes)
	if h.start > 0 {
		if err := z.padding(img[:h.start], h); err != nil {
			free()
			return nil, err
		}
	}
	u := &openedUnit{h: h, free: free}
	// The abbreviation table ends where its zero code is; read on until
	// debug/dwarf finds it.
	want := h.abbrevOff + 16<<10
	var lineBytes []byte
	pass := 0
	if stmt, known := z.stmt(off); known {
		if lines && stmt >= 0 {
			if lineBytes, err = z.lineProgram(uint64(stmt)); err != nil {
				free()
				return nil, err
			}
		}
		pass = 1 // the first dwarf.New is the last
	}
	for {
		abbrev, err := z.abbrev.span(h.abbrevOff, want)
		if err != nil {
			free()
			return nil, err
		}
		d, err := dwarf.New(abbrev, nil, nil, img, lineBytes, nil, whole[1], whole[0])
		if err != nil {
			if uint64(len(abbrev)) >= want {
				want *= 2
				continue
			}
			free()
			return nil, &FormatError{".debug_info", int64(off), err}
		}
		for i, name := range wholeSections[2:] {
			if b := whole[2+i]; len(b) > 0 {
				if err := d.AddSection(name, b); err != nil {
					free()
					return nil, &FormatError{name, -1, err}
				}
			}
		}
		u.d = d
		if pass > 0 {
			return u, nil
		}
		pass++
		// Now the line program: where it is comes from the unit's
		// first DIE.
		r := d.Reader()
		r.Seek(dwarf.Offset(h.dieOff))
		top, err := r.Next()
		if err != nil || top == nil {
			free()
			return nil, &FormatError{".debug_info", int64(off), fmt.Errorf("reading compile unit: %v", err)}
		}
		stmt, ok := top.Val(dwarf.AttrStmtList).(int64)
		if !ok || stmt < 0 {
			stmt = -1
		}
		z.setStmt(off, stmt)
		if !lines || stmt < 0 {
			return u, nil // no line table wanted, or none
		}
		if lineBytes, err = z.lineProgram(uint64(stmt)); err != nil {
			free()
			return nil, err
		}
	}
}

// maxStmts bounds z.stmts; past it the map restarts.
const maxStmts = 1 << 14

func (z *lazyDWARF) stmt(off uint64) (stmt int64, known bool) {
	z.stmtMu.Lock()
	defer z.stmtMu.Unlock()
	stmt, known = z.stmts[off]
	return stmt, known
}

func (z *lazyDWARF) setStmt(off uint64, stmt int64) {
	z.stmtMu.Lock()
	defer z.stmtMu.Unlock()
	if z.stmts == nil || len(z.stmts) >= maxStmts {
		z.stmts = map[uint64]int64{}
	}
	z.stmts[off] = stmt
}

// lineProgram returns a prefix of .debug_line that holds the line program
// at off.
func (z *lazyDWARF) lineProgram(off uint64) ([]byte, error) {
	b, err := z.line.at(off, 4)
	if err != nil {
		return nil, err
	}
	length, hlen := uint64(z.order.Uint32(b)), uint64(4)
	if length == 0xffffffff {
		if b, err = z.line.at(off+4, 8); err != nil {
			return nil, err
		}
		length, hlen = z.order.Uint64(b), 12
	}
	if _, err := z.line.at(off, hlen+length); err != nil {
		return nil, err
	}
	return z.line.span(off, off+hlen+length)
}

// unitAt finds the start of the unit that holds .debug_info offset off,
// by hopping over unit headers from the start of the section. Only the
// rare reference into another unit (LTO's abstract origins) needs it.
func (z *lazyDWARF) unitAt(off uint64) (uint64, error) {
	var start uint64
	for {
		h, err := z.header(start)
		if err != nil {
			return 0, err
		}
		if off < h.end {
			return start, nil
		}
		start = h.end
	}
}

// imageBuffer returns n zero bytes. Large images are anonymous mappings,
// so only the pages written cost memory, and free unmaps them at once
// instead of waiting for the collector.
func imageBuffer(n uint64) ([]byte, func(), error) {
	if n < 1<<20 {
		return make([]byte, n), func() {}, nil
	}
	if n > 1<<40 {
		return nil, nil, fmt.Errorf("debuginfo: unit image of %d bytes", n)
	}
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	return b, func() { unix.Munmap(b) }, nil
}
