package debuginfo

import (
	"debug/elf"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
)

// A Cache keeps, in files, the decompressed bytes of compressed DWARF
// sections that lookups needed, so the next run reads them instead of
// inflating them again (libc's debug file: tens of milliseconds of zlib
// per run, against a read of a few megabytes from the page cache).
//
// Files are keyed by the debug file's build ID and section name, and
// carry the file's identity (device, inode and change time, which no user
// can set and every write moves), the section's sizes, its place in the
// file and a CRC-32C of its first 4 KiB as stored (compressed). A build ID
// is only the file's own claim: without the identity, a file made to
// claim another's build ID, with the same sizes and head, would leave its
// bytes for later runs on the real one. A section not read from a file
// (MiniDebugInfo's, in memory) has no identity and is not cached. The stored
// bytes are read, not inflated: inflating a head costs a whole 32 KiB
// window of zlib per section (2.4 ms for libc's seven, on every run); a
// compressed stream's start fixes its decompressed start, so the check is
// no weaker. Each file holds a
// prefix of the section and a CRC-32C of every 64 KiB block of it. A
// lookup reads (and checks) only the blocks it uses, each once, into an
// anonymous mapping as long as the prefix, so a run that needs one unit
// near the end of libc's 6 MB of .debug_info neither reads nor holds the
// rest. The file is not mapped: the kernel maps a file's page cache in
// whole folios (with ext4's large folios since Linux 6.16 up to 2 MiB for
// one touched byte), which made a 1,000-thread dump's resident set 5 MB
// of cache file for 600 KB of blocks read. A file of the wrong
// size, a bad header or a block whose sum does not match is ignored from
// there on, never believed. Files are written to a temporary name and
// renamed, never changed in place, so concurrent runs each see a whole
// file, theirs or another's, and a mapping never shrinks under its
// reader. Any error of the cache costs speed, never an answer. The cache
// may be deleted at any time.
type Cache struct {
	Dir string
}

// DefaultCacheDir is where stacktop keeps its DWARF cache (and the symbol
// tables of objcache.go): stacktop/dwarf under the user's cache directory
// ($XDG_CACHE_HOME, else ~/.cache).
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "stacktop", "dwarf")
}

// cacheMagic starts every cache file; "1" files (one sum over the whole
// prefix, read whole), "2" files (head sum over decompressed bytes) and
// "3" files (no file identity) are ignored and replaced.
const cacheMagic = "STKDWC4\n"

// cacheKey says which section of which file a cache file holds.
type cacheKey struct {
	dev, ino, ctimeNS      uint64 // the file's identity
	size, fileSize, offset uint64
	headCRC                uint32
}

// A cache file is: cacheMagic; the key (device, inode, change time, size,
// file size, offset: 8 bytes each; head CRC: 4); the prefix length (8);
// the block size (4); one CRC-32C per block of the prefix (4 each); a
// CRC-32C of all the bytes before it (4); then the prefix.
const cacheHeaderLen = len(cacheMagic) + 6*8 + 4 + 8 + 4

// cacheBlock is the unit of checking: a lookup checks the blocks it reads.
const cacheBlock = 64 << 10

// castagnoliTable is made at first use, not at package init: making it
// builds hash/crc32's SSE4.2 tables, 0.2 ms of every start-up, also of
// the runs (--no-lines, usage errors) that never read DWARF.
var castagnoliTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// sectionCache is one section's entry in a Cache.
type sectionCache struct {
	path string
	key  cacheKey
}

// cacheFor returns the entry of sec of f in c, or nil when c is nil, the
// section is not compressed (reading it costs no more than the cache), f
// has no build ID or its file is unknown. file is f's bytes (rawFile).
func (c *Cache) cacheFor(sec *elf.Section, file io.ReaderAt, buildID string) *sectionCache {
	if c == nil || c.Dir == "" || sec == nil || sec.Flags&elf.SHF_COMPRESSED == 0 || buildID == "" {
		return nil
	}
	id, ok := fileIdentity(file)
	if !ok {
		return nil
	}
	head := make([]byte, min(sec.FileSize, 4096))
	if n, err := file.ReadAt(head, int64(sec.Offset)); n < len(head) && err != nil {
		return nil
	}
	return &sectionCache{
		path: filepath.Join(c.Dir, buildID, strings.TrimPrefix(sec.Name, ".")),
		key: cacheKey{id.Dev, id.Ino, id.CtimeNS, sec.Size, sec.FileSize, sec.Offset,
			crc32.Checksum(head, castagnoliTable())},
	}
}

// fileID is what names a file's contents for a cache: its device and
// inode, and its change time.
type fileID struct{ Dev, Ino, CtimeNS uint64 }

// fileIdentity is the identity of the file r reads, if r is one (an
// *os.File, or a file that gives its *os.File, as targetfile's do).
func fileIdentity(r io.ReaderAt) (fileID, bool) {
	var fh *os.File
	switch f := r.(type) {
	case interface {
		Identity() (dev, ino, ctimeNS uint64)
	}:
		// A target's file: as checked at its open, with no fstat now
		// (on FUSE one waits on the target's server, with no deadline).
		dev, ino, ctime := f.Identity()
		return fileID{dev, ino, ctime}, true
	case *os.File:
		fh = f
	default:
		return fileID{}, false
	}
	fi, err := fh.Stat() // not a bare Fd: the file may be closed meanwhile
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino, uint64(st.Ctim.Nano())}, true
}

// rawFile returns the bytes f was read from, as debug/elf reads them,
// found through an uncompressed section (every object has one: the
// section names); nil if there is none.
func rawFile(f *elf.File) io.ReaderAt {
	for _, s := range f.Sections {
		if sr, ok := s.ReaderAt.(*io.SectionReader); ok && s.Flags&elf.SHF_COMPRESSED == 0 {
			if outer, _, _ := sr.Outer(); outer != nil {
				return outer
			}
		}
	}
	return nil
}

// objectBuildID is f's build ID, "" if it has none.
func objectBuildID(f *elf.File) string {
	id, err := buildid.Read(f)
	if err != nil || strings.ContainsAny(id, "/.") {
		return ""
	}
	return id
}

// cachedPrefix is a cache file's prefix, read and checked block by block.
type cachedPrefix struct {
	// data is an anonymous mapping of the prefix's length; a block's
	// bytes are there once check has read them (zero before: never
	// handed out).
	data   []byte
	file   *os.File // the cache file, open until the prefix is dropped
	dataAt int64    // where the prefix starts in file
	sums   []uint32 // CRC-32C of each cacheBlock of data
	ok     []bool   // blocks read and checked good
}

// load opens the cached prefix, or returns nil if there is none whose
// header can be trusted. The prefix's blocks are read and checked as they
// are used (check).
func (sc *sectionCache) load() (c *cachedPrefix) {
	f, err := os.Open(sc.path)
	if err != nil {
		return nil
	}
	defer func() {
		if c == nil {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < int64(cacheHeaderLen) || fi.Size() > 1<<40 {
		return nil
	}
	var h [cacheHeaderLen]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:len(cacheMagic)]) != cacheMagic {
		return nil
	}
	le := binary.LittleEndian
	p := h[len(cacheMagic):]
	key := cacheKey{le.Uint64(p), le.Uint64(p[8:]), le.Uint64(p[16:]),
		le.Uint64(p[24:]), le.Uint64(p[32:]), le.Uint64(p[40:]), le.Uint32(p[48:])}
	n, block := le.Uint64(p[52:]), le.Uint32(p[60:])
	if key != sc.key || n == 0 || n > sc.key.size || block != cacheBlock {
		return nil
	}
	blocks := (n + cacheBlock - 1) / cacheBlock
	dataAt := uint64(cacheHeaderLen) + 4*blocks + 4
	if uint64(fi.Size()) != dataAt+n {
		return nil // truncated, or longer than it says
	}
	table := make([]byte, 4*blocks+4)
	if _, err := io.ReadFull(f, table); err != nil {
		return nil
	}
	sum := crc32.Update(crc32.Checksum(h[:], castagnoliTable()), castagnoliTable(), table[:4*blocks])
	if sum != le.Uint32(table[4*blocks:]) {
		return nil
	}
	m, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	c = &cachedPrefix{data: m[:n:n], file: f, dataAt: int64(dataAt), sums: make([]uint32, blocks), ok: make([]bool, blocks)}
	for i := range c.sums {
		c.sums[i] = le.Uint32(table[4*i:])
	}
	// Unmapped and closed when the section that holds it is gone: what
	// lookups keep (names, rows) is copied out of it.
	runtime.AddCleanup(c, func(m []byte) { unix.Munmap(m) }, m)
	runtime.AddCleanup(c, func(f *os.File) { f.Close() }, f)
	return c
}

// check reports whether the blocks holding data[off:end] were read whole
// and match their sums, reading and checking those not read yet. The
// caller serialises calls (the section's lock).
func (c *cachedPrefix) check(off, end uint64) bool {
	end = min(end, uint64(len(c.data)))
	for b := off / cacheBlock; b*cacheBlock < end; b++ {
		if c.ok[b] {
			continue
		}
		lo := b * cacheBlock
		hi := min(lo+cacheBlock, uint64(len(c.data)))
		if n, err := c.file.ReadAt(c.data[lo:hi], c.dataAt+int64(lo)); uint64(n) != hi-lo && err != nil {
			return false
		}
		if crc32.Checksum(c.data[lo:hi], castagnoliTable()) != c.sums[b] {
			return false
		}
		c.ok[b] = true
	}
	return true
}

// store writes data as the cached prefix, atomically.
func (sc *sectionCache) store(data []byte) error {
	le := binary.LittleEndian
	h := []byte(cacheMagic)
	h = le.AppendUint64(h, sc.key.dev)
	h = le.AppendUint64(h, sc.key.ino)
	h = le.AppendUint64(h, sc.key.ctimeNS)
	h = le.AppendUint64(h, sc.key.size)
	h = le.AppendUint64(h, sc.key.fileSize)
	h = le.AppendUint64(h, sc.key.offset)
	h = le.AppendUint32(h, sc.key.headCRC)
	h = le.AppendUint64(h, uint64(len(data)))
	h = le.AppendUint32(h, cacheBlock)
	for lo := 0; lo < len(data); lo += cacheBlock {
		h = le.AppendUint32(h, crc32.Checksum(data[lo:min(lo+cacheBlock, len(data))], castagnoliTable()))
	}
	h = le.AppendUint32(h, crc32.Checksum(h, castagnoliTable()))
	return writeAtomically(sc.path, h, data)
}

// writeAtomically writes parts, one after the other, to path through a
// temporary file renamed over it: readers see the old file or the new
// one, whole.
func writeAtomically(path string, parts ...[]byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	removeStaleTemps(dir)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	for _, b := range parts {
		if _, err = tmp.Write(b); err != nil {
			break
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// staleTemp is the age past which a temporary file in the cache is taken
// for the remains of a run that was killed while it wrote.
const staleTemp = 10 * time.Minute

func removeStaleTemps(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	for _, n := range names {
		if fi, err := os.Lstat(n); err == nil && time.Since(fi.ModTime()) > staleTemp {
			os.Remove(n)
		}
	}
}
