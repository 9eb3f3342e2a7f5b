package debuginfod

import (
	"context"
	"debug/elf"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// Prefetch fetches the debug files of pid's mapped objects that have a
// build ID and no debug file on this host (debuginfo.Locator: the debug
// directories, a debuglink, the cache). Call it before attaching, so that
// no thread is stopped while it downloads. It returns how many files it
// fetched; failures for single objects are not errors (the frames of
// those objects just get no lines), only not being able to read the
// process's maps is.
func (c *Client) Prefetch(ctx context.Context, pid int) (fetched int, err error) {
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		return 0, err
	}
	user, err := procmaps.FileUser(pid)
	if err != nil {
		return 0, err
	}
	loc := debuginfo.Locator{Root: procmaps.RootDir(pid), Reader: user}
	seen := map[string]bool{}
	for i := range maps {
		m := &maps[i]
		if !m.IsExec() || !m.IsFile() || seen[m.Path] {
			continue
		}
		seen[m.Path] = true
		if ctx.Err() != nil {
			return fetched, ctx.Err()
		}
		fh, _, err := procmaps.OpenMapping(pid, m)
		if err != nil {
			continue
		}
		loc.Object = debuginfo.FileID{Dev: uint64(fh.Stat.Dev), Ino: fh.Stat.Ino}
		ok := c.prefetchOne(ctx, loc, m.Path, fh)
		fh.Close()
		if ok {
			fetched++
		}
	}
	return fetched, nil
}

// prefetchOne fetches the debug file of one object if it has none here.
func (c *Client) prefetchOne(ctx context.Context, loc debuginfo.Locator, path string, fh interface {
	ReadAt([]byte, int64) (int, error)
}) (fetched bool) {
	defer func() {
		if recover() != nil { // a corrupt object: debug/elf panicked
			fetched = false
		}
	}()
	f, err := elf.NewFile(fh)
	if err != nil {
		return false
	}
	id, err := buildid.Read(f)
	if err != nil || id == "" {
		return false
	}
	if f.Section(".debug_info") != nil {
		return false // the object carries its own DWARF
	}
	if df, err := loc.Find(path, f, id); err == nil {
		df.Close()
		return false
	}
	_, err = c.Fetch(ctx, id)
	return err == nil
}
