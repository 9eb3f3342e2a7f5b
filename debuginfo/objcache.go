package debuginfo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// The cache also keeps what stacktop builds from an object's symbol
// tables, as bytes its callers encode (a symbols.Table, the names
// symbols.FuncValues finds), in a file per kind ("symtab", "funcs")
// beside the object's DWARF files: libc's table costs about 4 ms of CPU
// to build from its .symtab, .dynsym and its debug file's .symtab, and
// its function names 2 ms more; reading them back, a tenth of that.
//
// The caller gives the object's build ID and a key that names everything
// the bytes were built from (the object's and its debug file's sizes and
// times, say): bytes built from other inputs do not match and are
// replaced. A file holds objCacheMagic; the key's length (4 bytes) and
// the key; the payload's length (8); a CRC-32C of the key and the payload
// (4); the payload. It is written to a temporary name and renamed, so a
// concurrent run reads a whole file, its own or another's; a file that is
// short, long, of another key or whose sum does not match is ignored.
// Like the rest of the cache, an error costs time, never a wrong answer:
// the caller decodes the payload with its own checks.
const objCacheMagic = "STKOBJ1\n"

// objCacheMax bounds what is read back: a bigger file is not one of ours.
const objCacheMax = 256 << 20

// Load returns the payload of kind cached for the object with buildID
// under key; ok is false when there is none that matches.
func (c *Cache) Load(buildID, kind, key string) (payload []byte, ok bool) {
	path, ok := c.objectPath(buildID, kind)
	if !ok {
		return nil, false
	}
	b, err := readSmallFile(path, objCacheMax)
	if err != nil {
		return nil, false
	}
	payload, err = decodeObjCacheFile(b, key)
	return payload, err == nil
}

// Store writes payload as the object's kind under key.
func (c *Cache) Store(buildID, kind, key string, payload []byte) error {
	path, ok := c.objectPath(buildID, kind)
	if !ok {
		return nil
	}
	if uint64(len(payload))+uint64(len(key)) > objCacheMax-64 {
		return fmt.Errorf("debuginfo: %s of %s: %d bytes, more than the cache reads back", kind, buildID, len(payload))
	}
	le := binary.LittleEndian
	h := []byte(objCacheMagic)
	h = le.AppendUint32(h, uint32(len(key)))
	h = append(h, key...)
	h = le.AppendUint64(h, uint64(len(payload)))
	sum := crc32.Update(crc32.Checksum([]byte(key), castagnoliTable()), castagnoliTable(), payload)
	h = le.AppendUint32(h, sum)
	return writeAtomically(path, h, payload)
}

// objectPath is the file of buildID's kind; ok is false without a cache,
// for a build ID that is not a plain hex string (it names a directory) or
// a kind that is not a plain name.
func (c *Cache) objectPath(buildID, kind string) (path string, ok bool) {
	if c == nil || c.Dir == "" || len(buildID) < 2 || kind == "" {
		return "", false
	}
	for _, r := range buildID {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return "", false
		}
	}
	for _, r := range kind {
		if !('a' <= r && r <= 'z') {
			return "", false
		}
	}
	return filepath.Join(c.Dir, buildID, kind), true
}

// decodeObjCacheFile checks a cache file's framing, key and sum and
// returns its payload.
func decodeObjCacheFile(b []byte, key string) ([]byte, error) {
	le := binary.LittleEndian
	if len(b) < len(objCacheMagic)+4 || string(b[:len(objCacheMagic)]) != objCacheMagic {
		return nil, errors.New("not an object cache file")
	}
	off := len(objCacheMagic)
	keyLen := uint64(le.Uint32(b[off:]))
	off += 4
	if uint64(len(b)-off) < keyLen+12 {
		return nil, fmt.Errorf("offset %d: %d bytes of key and lengths past the end", off, keyLen+12)
	}
	if string(b[off:off+int(keyLen)]) != key {
		return nil, errors.New("built from other files")
	}
	off += int(keyLen)
	n, sum := le.Uint64(b[off:]), le.Uint32(b[off+8:])
	off += 12
	if uint64(len(b)-off) != n {
		return nil, fmt.Errorf("offset %d: payload of %d bytes in %d", off, n, len(b)-off)
	}
	if crc32.Update(crc32.Checksum([]byte(key), castagnoliTable()), castagnoliTable(), b[off:]) != sum {
		return nil, errors.New("sum does not match")
	}
	return b[off:], nil
}

// readSmallFile reads the file at path whole, if it is at most max bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", path, fi.Size(), max)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
