package debuginfo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"stacktop/symbols"
)

// The cache also keeps each object's merged symbol table (symbols.Table's
// binary form), in a file "symtab" beside its DWARF sections' files: to
// build libc's from its .symtab, .dynsym and its debug file's .symtab
// costs about 4 ms of every run, to read it back a tenth of that.
//
// The caller gives the object's build ID and a key that names everything
// the table was built from (the object's and its debug file's sizes and
// times, its MiniDebugInfo's size): a table built from other inputs does
// not match and is replaced. A file holds symCacheMagic; the key's length
// (4 bytes) and the key; the table's length (8); a CRC-32C of the key and
// the table (4); the table. It is written to a temporary name and renamed,
// so a concurrent run reads a whole file, its own or another's; a file
// that is short, long, of another key or whose sum does not match is
// ignored. Like the rest of the cache, an error costs time, never a
// wrong name.
const symCacheMagic = "STKSYM1\n"

// symCacheMax bounds what is read back: a bigger file is not one of ours.
const symCacheMax = 256 << 20

// Symbols returns the table cached for the object with buildID and key,
// or nil when there is none that matches.
func (c *Cache) Symbols(buildID, key string) *symbols.Table {
	path, ok := c.symbolsPath(buildID)
	if !ok {
		return nil
	}
	b, err := readSmallFile(path, symCacheMax)
	if err != nil {
		return nil
	}
	payload, err := decodeSymCacheFile(b, key)
	if err != nil {
		return nil
	}
	tab, err := symbols.UnmarshalTable(payload)
	if err != nil {
		return nil
	}
	return tab
}

// StoreSymbols writes tab as the table of the object with buildID and key.
func (c *Cache) StoreSymbols(buildID, key string, tab *symbols.Table) error {
	path, ok := c.symbolsPath(buildID)
	if !ok {
		return nil
	}
	le := binary.LittleEndian
	b := []byte(symCacheMagic)
	b = le.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	lenAt := len(b)
	b = le.AppendUint64(b, 0) // the table's length, below
	b = le.AppendUint32(b, 0) // its sum, below
	tableAt := len(b)
	b, err := tab.AppendBinary(b)
	if err != nil {
		return err
	}
	le.PutUint64(b[lenAt:], uint64(len(b)-tableAt))
	sum := crc32.Update(crc32.Checksum([]byte(key), castagnoliTable()), castagnoliTable(), b[tableAt:])
	le.PutUint32(b[lenAt+8:], sum)
	return writeAtomically(path, b)
}

// symbolsPath is the file of buildID's table; ok is false without a cache
// or for a build ID that is not a plain hex string (it names a directory).
func (c *Cache) symbolsPath(buildID string) (path string, ok bool) {
	if c == nil || c.Dir == "" || len(buildID) < 2 {
		return "", false
	}
	for _, r := range buildID {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return "", false
		}
	}
	return filepath.Join(c.Dir, buildID, "symtab"), true
}

// decodeSymCacheFile checks a symtab cache file's framing, key and sum
// and returns the table's bytes.
func decodeSymCacheFile(b []byte, key string) ([]byte, error) {
	le := binary.LittleEndian
	if len(b) < len(symCacheMagic)+4 || string(b[:len(symCacheMagic)]) != symCacheMagic {
		return nil, errors.New("not a symbol table cache file")
	}
	off := len(symCacheMagic)
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
		return nil, fmt.Errorf("offset %d: table of %d bytes in %d", off, n, len(b)-off)
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
