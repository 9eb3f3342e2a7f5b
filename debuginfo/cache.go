package debuginfo

import (
	"debug/elf"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"stacktop/internal/buildid"
)

// A Cache keeps, in files, the decompressed bytes of compressed DWARF
// sections that lookups needed, so the next run reads them instead of
// inflating them again (libc's debug file: tens of milliseconds of zlib
// per run, against a read of a few megabytes from the page cache).
//
// Files are keyed by the debug file's build ID and section name, and
// carry the section's sizes, its place in the file and a CRC-32C of its
// first 4 KiB, decompressed, so a different file with the same build ID
// (re-processed by dwz, recompressed) does not match. Each file holds a
// prefix of the section and the CRC-32C of it: a truncated, corrupt or
// foreign file is ignored, never believed. Files are written to a
// temporary name and renamed, so concurrent runs each see a whole file,
// theirs or another's. Any error of the cache costs speed, never an
// answer. The cache may be deleted at any time.
type Cache struct {
	Dir string
}

// DefaultCacheDir is where stacktop keeps its DWARF cache: stacktop/dwarf
// under the user's cache directory ($XDG_CACHE_HOME, else ~/.cache).
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "stacktop", "dwarf")
}

const cacheMagic = "STKDWC1\n"

// cacheKey says which section of which file a cache file holds.
type cacheKey struct {
	size, fileSize, offset uint64
	headCRC                uint32
}

const cacheHeaderLen = len(cacheMagic) + 3*8 + 4 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sectionCache is one section's entry in a Cache.
type sectionCache struct {
	path string
	key  cacheKey
}

// cacheFor returns the entry of sec of f in c, or nil when c is nil, the
// section is not compressed (reading it costs no more than the cache) or
// f has no build ID.
func (c *Cache) cacheFor(sec *elf.Section, buildID string) *sectionCache {
	if c == nil || c.Dir == "" || sec == nil || sec.Flags&elf.SHF_COMPRESSED == 0 || buildID == "" {
		return nil
	}
	head := make([]byte, min(sec.Size, 4096))
	n, _ := io.ReadFull(sec.Open(), head)
	return &sectionCache{
		path: filepath.Join(c.Dir, buildID, strings.TrimPrefix(sec.Name, ".")),
		key:  cacheKey{sec.Size, sec.FileSize, sec.Offset, crc32.Checksum(head[:n], castagnoli)},
	}
}

// objectBuildID is f's build ID, "" if it has none.
func objectBuildID(f *elf.File) string {
	id, err := buildid.Read(f)
	if err != nil || strings.ContainsAny(id, "/.") {
		return ""
	}
	return id
}

// load returns the cached prefix, or nil if there is none that can be
// trusted.
func (sc *sectionCache) load() []byte {
	b, err := os.ReadFile(sc.path)
	if err != nil || len(b) < cacheHeaderLen || string(b[:len(cacheMagic)]) != cacheMagic {
		return nil
	}
	h := b[len(cacheMagic):]
	le := binary.LittleEndian
	key := cacheKey{le.Uint64(h), le.Uint64(h[8:]), le.Uint64(h[16:]), le.Uint32(h[24:])}
	n, sum := le.Uint64(h[28:]), le.Uint32(h[36:])
	data := b[cacheHeaderLen:]
	if key != sc.key || n != uint64(len(data)) || n > sc.key.size || crc32.Checksum(data, castagnoli) != sum {
		return nil
	}
	return data
}

// store writes data as the cached prefix, atomically.
func (sc *sectionCache) store(data []byte) error {
	dir := filepath.Dir(sc.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	removeStaleTemps(dir)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	le := binary.LittleEndian
	h := []byte(cacheMagic)
	h = le.AppendUint64(h, sc.key.size)
	h = le.AppendUint64(h, sc.key.fileSize)
	h = le.AppendUint64(h, sc.key.offset)
	h = le.AppendUint32(h, sc.key.headCRC)
	h = le.AppendUint64(h, uint64(len(data)))
	h = le.AppendUint32(h, crc32.Checksum(data, castagnoli))
	_, err = tmp.Write(h)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), sc.path)
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
