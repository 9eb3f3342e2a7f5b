package procmaps

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/targetfile"
)

// Source says how the file behind a mapping was opened.
type Source uint8

const (
	SourceNone     Source = iota
	SourceMapFiles        // /proc/PID/map_files/START-END: the mapped file itself
	SourceRoot            // /proc/PID/root/PATH: the path in the process's mount namespace
	SourcePath            // PATH in our own mount namespace
	SourceImage           // an in-memory image (ModuleFromImage)
)

func (s Source) String() string {
	switch s {
	case SourceMapFiles:
		return "map_files"
	case SourceRoot:
		return "root"
	case SourcePath:
		return "path"
	case SourceImage:
		return "image"
	}
	return "none"
}

// MismatchError says that the file found at a path is not the one mapped:
// its device or inode differ from the maps line (the file was replaced, e.g.
// by a package upgrade, or the path names another file in our namespace).
type MismatchError struct {
	Path             string
	WantMaj, WantMin uint32
	WantIno          uint64
	GotMaj, GotMin   uint32
	GotIno           uint64
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("procmaps: %s is %x:%x inode %d, mapping is %x:%x inode %d (file replaced?)",
		e.Path, e.GotMaj, e.GotMin, e.GotIno, e.WantMaj, e.WantMin, e.WantIno)
}

// ErrNotFile is returned by OpenMapping for a mapping with no backing file.
var ErrNotFile = errors.New("procmaps: mapping has no backing file")

// OpenError collects why every way of opening a mapping's file failed.
type OpenError struct {
	Path string
	Errs []error // one per attempt, in order
}

func (e *OpenError) Error() string {
	s := "procmaps: cannot open " + strconv.Quote(e.Path)
	for _, err := range e.Errs {
		s += "; " + err.Error()
	}
	return s
}

func (e *OpenError) Unwrap() []error { return e.Errs }

// OpenMapping opens the file behind a file mapping of process pid. It tries,
// in order:
//
//  1. /proc/PID/map_files/START-END, a magic link to the very file mapped. It
//     works for deleted and replaced files and across mount namespaces, but
//     needs CAP_SYS_ADMIN (or, on newer kernels, ptrace access) to follow.
//  2. PATH inside /proc/PID/root, the path as the process sees it
//     (containers), its symlinks resolved in the process's root.
//  3. PATH in our own namespace.
//
// Every way opens through targetfile: the path is the target's to choose,
// and may name a FIFO, a device or a file on a mount the target serves, so
// only a regular file is opened, under a deadline. Files found through a
// path (2 and 3) are accepted only when their device and inode equal the
// mapping's, so a replaced or different file is never used silently; such
// a file yields a *MismatchError in the returned *OpenError. The caller
// owns the returned file.
func OpenMapping(pid int, m *Mapping) (*targetfile.File, Source, error) {
	return openMapping(pid, m, true)
}

// openMapping is OpenMapping with the map_files step optional, so tests can
// exercise the path checks as root.
func openMapping(pid int, m *Mapping, mapFiles bool) (*targetfile.File, Source, error) {
	if !m.IsFile() {
		return nil, SourceNone, ErrNotFile
	}
	oe := &OpenError{Path: m.Path}
	if mapFiles {
		mf := procPath(pid, fmt.Sprintf("map_files/%x-%x", m.Start, m.End))
		f, err := targetfile.Opener{}.OpenProcLink(mf)
		if err == nil {
			// The link is the mapped file by construction. Device numbers
			// can still differ from the maps line on btrfs subvolumes and
			// overlayfs, where stat's st_dev is not the superblock's, so
			// only the inode is checked, as a guard against the range
			// having been remapped since maps was read.
			if err = checkIdentity(&f.Stat, m, mf, false); err == nil {
				return f, SourceMapFiles, nil
			}
			f.Close()
		}
		oe.Errs = append(oe.Errs, err)
	}
	// A deleted mapping's path is usually gone or names a new file; it is
	// still tried, and the identity check below rejects a newcomer.
	for _, try := range []struct {
		opener targetfile.Opener
		src    Source
	}{
		{targetfile.Opener{Root: procPath(pid, "root")}, SourceRoot},
		{targetfile.Opener{}, SourcePath},
	} {
		f, err := try.opener.Open(m.Path)
		if err == nil {
			if err = checkIdentity(&f.Stat, m, try.opener.Root+m.Path, true); err == nil {
				return f, try.src, nil
			}
			f.Close()
		}
		oe.Errs = append(oe.Errs, err)
	}
	return nil, SourceNone, oe
}

func checkIdentity(st *unix.Stat_t, m *Mapping, path string, withDev bool) error {
	maj, mnr := unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev))
	if st.Ino != m.Inode || withDev && (maj != m.DevMajor || mnr != m.DevMinor) {
		return &MismatchError{Path: path, WantMaj: m.DevMajor, WantMin: m.DevMinor, WantIno: m.Inode,
			GotMaj: maj, GotMin: mnr, GotIno: st.Ino}
	}
	return nil
}
