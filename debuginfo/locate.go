package debuginfo

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
	"codeberg.org/stacktop/stacktop/targetfile"
)

// DefaultDebugDir is where distributions install separate debug files.
const DefaultDebugDir = "/usr/lib/debug"

// Locator finds the separate debug file of an object, the way gdb does.
// The zero value searches the host's /usr/lib/debug.
//
// The paths searched are the target's to choose: the object's directory
// and the target's root are its own. Candidates are opened through
// targetfile: regular files only, resolved inside Root, bounded in size
// and time, and, with Reader, only files the target's user could read.
type Locator struct {
	// Root is the directory the paths are searched in first, e.g.
	// /proc/PID/root so that a containerised target's own debug files
	// are found; the host's paths are then tried. "" searches the host
	// only.
	Root string
	// DebugDirs replaces []string{DefaultDebugDir} when not empty.
	DebugDirs []string
	// Reader is the target's user; nil opens files of any owner.
	Reader *targetfile.User
	// Object is the object's own file (device and inode), skipped when a
	// debuglink names it; zero to compare nothing.
	Object FileID
}

// FileID names a file by device and inode.
type FileID struct{ Dev, Ino uint64 }

// MaxDebugFileSize bounds a debug file opened on a target's behalf (the
// biggest distribution debug files are a few hundred MB).
const MaxDebugFileSize = 4 << 30

// DebugFile is an opened separate debug file. Close it when done.
type DebugFile struct {
	File *elf.File
	Path string // as opened (with Root, if it was found there)
	Via  string // "build-id" or "debuglink"
	f    *targetfile.File
}

// Close closes the file.
func (d *DebugFile) Close() error { return d.f.Close() }

// Stat describes the file opened (its identity, size and times key caches
// built from it).
func (d *DebugFile) Stat() *unix.Stat_t { return &d.f.Stat }

// ErrNotFound is returned when no debug file exists for an object.
var ErrNotFound = errors.New("debuginfo: no separate debug file found")

func (l Locator) debugDirs() []string {
	if len(l.DebugDirs) > 0 {
		return l.DebugDirs
	}
	return []string{DefaultDebugDir}
}

// roots lists the prefixes to try, the target's first.
func (l Locator) roots() []string {
	if l.Root == "" || l.Root == "/" {
		return []string{""}
	}
	return []string{l.Root, ""}
}

// BuildIDPaths lists the candidate paths of the debug file of an object
// with the given build ID (lowercase hex), without Root: under each debug
// directory, then in the debuginfod client cache.
func (l Locator) BuildIDPaths(buildID string) []string {
	if len(buildID) < 4 {
		return nil
	}
	var out []string
	for _, dir := range l.debugDirs() {
		out = append(out, path.Join(dir, ".build-id", buildID[:2], buildID[2:]+".debug"))
	}
	// What debuginfod clients (stacktop's, eu-stack's, gdb's) downloaded.
	if p := DebuginfodCachePath(buildID); p != "" {
		out = append(out, p)
	}
	return out
}

// DebugLinkPaths lists the candidate paths named by a debuglink of the
// object at objPath, in gdb's order: next to the object, in its .debug
// subdirectory, then under each debug directory mirroring the object's
// directory.
func (l Locator) DebugLinkPaths(objPath string, link DebugLink) []string {
	dir := path.Dir(objPath)
	out := []string{path.Join(dir, link.Name), path.Join(dir, ".debug", link.Name)}
	for _, d := range l.debugDirs() {
		out = append(out, path.Join(d, dir, link.Name))
	}
	return out
}

// Find returns the separate debug file of the object f mapped from
// objPath (the target's view of the path) with the given build ID ("" if
// none). A build-ID match is accepted when the candidate's build ID
// matches; a debuglink match when its CRC32 does. ErrNotFound means
// neither exists; other errors say why a candidate was rejected.
func (l Locator) Find(objPath string, f *elf.File, buildID string) (*DebugFile, error) {
	var rejected []error
	for _, root := range l.roots() {
		for _, p := range l.BuildIDPaths(buildID) {
			df, err := l.openCandidate(root, p, func(df *DebugFile) error {
				id, err := buildid.Read(df.File)
				if err != nil {
					return err
				}
				if id != buildID {
					return fmt.Errorf("build ID %s, want %s", id, buildID)
				}
				return nil
			})
			if df != nil {
				df.Via = "build-id"
				return df, nil
			}
			if err != nil {
				rejected = append(rejected, err)
			}
		}
	}
	link, err := ReadDebugLink(f)
	if errors.Is(err, ErrNoDebugLink) {
		return nil, errors.Join(append([]error{ErrNotFound}, rejected...)...)
	}
	if err != nil {
		return nil, err
	}
	for _, root := range l.roots() {
		for _, p := range l.DebugLinkPaths(objPath, link) {
			df, err := l.openCandidate(root, p, func(df *DebugFile) error {
				sum, err := CRC32(io.NewSectionReader(df.f, 0, df.f.Size()))
				if err != nil {
					return err
				}
				if sum != link.CRC32 {
					return fmt.Errorf("CRC32 %08x, want %08x", sum, link.CRC32)
				}
				return nil
			})
			if df != nil {
				df.Via = "debuglink"
				return df, nil
			}
			if err != nil {
				rejected = append(rejected, err)
			}
		}
	}
	return nil, errors.Join(append([]error{ErrNotFound}, rejected...)...)
}

// openCandidate opens p inside root as an ELF debug file and runs check
// on it. A missing file gives (nil, nil); the object itself is skipped,
// since a debuglink may name the object's own base name.
func (l Locator) openCandidate(root, p string, check func(*DebugFile) error) (*DebugFile, error) {
	fh, err := targetfile.Opener{Root: root, Reader: l.Reader, MaxSize: MaxDebugFileSize}.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if l.Object != (FileID{}) && l.Object == (FileID{uint64(fh.Stat.Dev), fh.Stat.Ino}) {
		fh.Close()
		return nil, nil
	}
	ef, err := newELF(fh)
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", root+p, err)
	}
	df := &DebugFile{File: ef, Path: root + p, f: fh}
	if err := check(df); err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", root+p, err)
	}
	return df, nil
}

// newELF is elf.NewFile with its panics turned into errors.
func newELF(r io.ReaderAt) (f *elf.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, &FormatError{"ELF headers", -1, fmt.Errorf("debug/elf panicked: %v", p)}
		}
	}()
	return elf.NewFile(r)
}
