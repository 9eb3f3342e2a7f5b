package debuginfo

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// lazySection is one section's bytes, read (and, for an SHF_COMPRESSED
// section, decompressed) only as far as a lookup needed so far. A zlib or
// zstd stream can only be decoded from its start, so the bytes kept are
// always a prefix of the section: a unit near the start of .debug_info
// costs a fraction of the section, one near the end nearly all of it, but
// never more than once.
//
// Bytes handed out are never modified: a longer prefix is a new (or
// grown) buffer whose first bytes are the same.
//
// A prefix found in the cache (mapped true) is read from the cache file
// and checked block by block as reads reach it, into a mapping as long as
// the prefix: a block that fails its check drops the cache, and the
// section is decompressed from its start (the mapping stays, for bytes
// handed out before).
type lazySection struct {
	name string
	sec  *elf.Section // nil: the section is absent (reads as empty)

	mu   sync.Mutex
	buf  []byte    // the first len(buf) bytes of the section
	r    io.Reader // positioned at len(buf); nil before the first read
	done bool      // buf holds the whole section
	err  error     // sticky: why the section could not be read further

	// The cache of decompressed prefixes, if any; looked up at the
	// first read.
	cache     *Cache
	file      io.ReaderAt // the object's bytes, for the cache key; nil if unknown
	buildID   string
	entry     *sectionCache
	cacheRead bool
	cachedLen int           // how much of buf the cache holds
	storedLen int           // how much the cache file holds (saveCache stores only more)
	cached    *cachedPrefix // the cache file's prefix; kept while s lives
	mapped    bool          // buf is cached.data
}

func newLazySection(f *elf.File, name string) *lazySection {
	s := &lazySection{name: name, sec: f.Section(name)}
	if s.sec == nil || s.sec.Type == elf.SHT_NOBITS {
		s.sec, s.done = nil, true
		return s
	}
	if s.sec.Flags&elf.SHF_COMPRESSED != 0 {
		s.file = rawFile(f)
	}
	if b, m := mapSection(s.sec); b != nil {
		s.buf, s.done = b, true
		// What lookups keep (names, rows) is copied out of it.
		runtime.AddCleanup(s, func(m []byte) { unix.Munmap(m) }, m)
	}
	return s
}

// mapSection maps an uncompressed section of an object read from a file,
// read-only, so a lookup touches the pages of the units it reads and
// nothing is copied (a -g program's .debug_info can be hundreds of MB). It
// returns nil where it cannot (a compressed section, an object in memory,
// an error): the section is then read as a stream. Objects and debug files
// are replaced by package managers (rename), not rewritten in place. m is
// the whole mapping, to unmap.
func mapSection(sec *elf.Section) (b, m []byte) {
	if sec.Flags&elf.SHF_COMPRESSED != 0 || sec.Size == 0 || sec.Size > 1<<40 || strings.HasPrefix(sec.Name, ".zdebug") {
		return nil, nil
	}
	sr, ok := sec.ReaderAt.(*io.SectionReader)
	if !ok {
		return nil, nil
	}
	outer, base, _ := sr.Outer()
	var fh *os.File
	switch f := outer.(type) {
	case *os.File:
		fh = f
	case interface{ Mappable() *os.File }:
		fh = f.Mappable() // nil where a page fault could wait or fault
	}
	if fh == nil {
		return nil, nil
	}
	fi, err := fh.Stat()
	off := base // the section's place in the file
	if err != nil || !fi.Mode().IsRegular() || off < 0 || uint64(off) != sec.Offset || uint64(off)+sec.Size > uint64(fi.Size()) {
		return nil, nil
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	// Through Control, which holds the file open meanwhile: a load in the
	// background may run while its resolver closes the file (Close does
	// not wait), and a bare Fd() could name a descriptor reused since.
	rc, err := fh.SyscallConn()
	if err != nil {
		return nil, nil
	}
	cerr := rc.Control(func(fd uintptr) {
		m, err = unix.Mmap(int(fd), start, int(off-start)+int(sec.Size), unix.PROT_READ, unix.MAP_SHARED)
	})
	if cerr != nil || err != nil {
		return nil, nil
	}
	b = m[off-start:]
	return b[:len(b):len(b)], m
}

// useCache makes s look for its bytes in c (under buildID) first.
func (s *lazySection) useCache(c *Cache, buildID string) {
	s.cache, s.buildID = c, buildID
}

// fromCache fills buf from the cache, once. Called with mu held.
func (s *lazySection) fromCache() {
	if s.cacheRead || s.sec == nil {
		return
	}
	s.cacheRead = true
	if s.entry = s.cache.cacheFor(s.sec, s.file, s.buildID); s.entry == nil {
		return
	}
	if c := s.entry.load(); c != nil {
		s.cached, s.mapped = c, true
		s.buf, s.cachedLen, s.storedLen = c.data, len(c.data), len(c.data)
		s.done = uint64(len(c.data)) == s.sec.Size
	}
}

// checkLocked makes sure buf[off:end] (as far as buf reaches) holds the
// section's bytes: a mapped cache block that fails its check drops the
// cache, and the bytes are decompressed instead. Called with mu held.
func (s *lazySection) checkLocked(off, end uint64) ([]byte, error) {
	b, err := s.prefixLocked(end)
	if err != nil || !s.mapped || s.cached.check(off, end) {
		return b, err
	}
	s.mapped, s.buf, s.done, s.cachedLen = false, nil, false, 0
	return s.prefixLocked(end)
}

// saveCache stores what was decompressed beyond what the cache holds.
func (s *lazySection) saveCache() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entry == nil || len(s.buf) <= max(s.cachedLen, s.storedLen) {
		return nil
	}
	if err := s.entry.store(s.buf); err != nil {
		return err
	}
	s.cachedLen, s.storedLen = len(s.buf), len(s.buf)
	return nil
}

// present reports whether the object has the section.
func (s *lazySection) present() bool { return s.sec != nil }

// lazyChunk is the least a read decompresses past what was asked: reads of
// successive units then cost one refill every few units, not one each.
const lazyChunk = 256 << 10

// readStep is how much is decompressed between two yields of the CPU.
const readStep = 64 << 10

// maxPrealloc bounds the capacity reserved up front from a section's
// declared size, which a corrupt header can inflate at will.
const maxPrealloc = 64 << 20

// prefixLocked returns at least the first n bytes of the section, or all
// of it if it is shorter: callers check the length against what they
// need. Mapped cache bytes in it are not checked yet (checkLocked).
func (s *lazySection) prefixLocked(n uint64) ([]byte, error) {
	s.fromCache()
	if uint64(len(s.buf)) >= n || s.done {
		return s.buf, nil
	}
	if s.err != nil {
		return s.buf, s.err
	}
	if s.r == nil {
		// A stream decodes from its start only: what the cache held is
		// decompressed again (and the longer prefix cached later).
		s.r = s.sec.Open()
		// The cache no longer backs buf (cachedLen), and its bytes were
		// never checked: none of them is believed.
		s.buf, s.mapped, s.cachedLen = nil, false, 0
		if size := s.sec.Size; size > 0 {
			s.buf = make([]byte, 0, min(size, maxPrealloc))
		}
	}
	want := max(n, uint64(len(s.buf))+lazyChunk)
	empty := 0
	for step := 0; uint64(len(s.buf)) < want; step++ {
		if len(s.buf) == cap(s.buf) {
			s.buf = append(s.buf, 0)[:len(s.buf)]
		}
		if step > 0 {
			// Decompressing a large prefix takes tens of milliseconds;
			// with GOMAXPROCS=1 (record, top) yielding between steps
			// lets the sampling engine's ticks run on time.
			runtime.Gosched()
		}
		m, err := s.r.Read(s.buf[len(s.buf):min(uint64(cap(s.buf)), want, uint64(len(s.buf))+readStep)])
		s.buf = s.buf[:len(s.buf)+m]
		if err == io.EOF {
			s.done = true
			break
		}
		if err == nil && m == 0 {
			if empty++; empty > 100 {
				err = io.ErrNoProgress
			}
		}
		if err != nil {
			s.err = &FormatError{s.name, int64(len(s.buf)), fmt.Errorf("decompressing: %w", err)}
			return s.buf, s.err
		}
	}
	return s.buf, nil
}

// span returns the first end bytes of the section (fewer if it is
// shorter), of which those from off on are checked (bytes of the cache
// before off may not be read yet): for a reader (debug/dwarf's) that is
// given a whole prefix but reads at off only.
func (s *lazySection) span(off, end uint64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.checkLocked(off, end)
	return b[:min(uint64(len(b)), end)], err
}

// all returns the whole section.
func (s *lazySection) all() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		b, err := s.prefixLocked(uint64(len(s.buf)) + 4*lazyChunk)
		if err != nil {
			return b, err
		}
		if s.done {
			return s.checkLocked(0, uint64(len(b)))
		}
	}
}

// at returns the n bytes at off, failing if the section ends before them.
func (s *lazySection) at(off, n uint64) ([]byte, error) {
	end := off + n
	if end < off {
		return nil, &FormatError{s.name, int64(off), errors.New("offset overflows")}
	}
	if s.sec == nil || end > s.sec.Size {
		// Checked before decompressing: a corrupt length must not make
		// us inflate (and hold) gigabytes.
		size := uint64(0)
		if s.sec != nil {
			size = s.sec.Size
		}
		return nil, &FormatError{s.name, int64(off), fmt.Errorf("%d bytes past the end of the section (%d bytes)", n, size)}
	}
	s.mu.Lock()
	b, err := s.checkLocked(off, end)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if uint64(len(b)) < end {
		return nil, &FormatError{s.name, int64(off), fmt.Errorf("%d bytes past the end of the section (%d bytes)", n, len(b))}
	}
	return b[off:end], nil
}
