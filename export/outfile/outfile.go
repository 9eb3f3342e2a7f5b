// Package outfile writes a file the way a shell redirection would, but
// never leaves a truncated one: a regular file (or a new path) is replaced
// atomically once its contents are complete, anything else (a device, a
// FIFO, a Unix socket, stdout) is written in place. See File for the rules.
//
// Lifecycle: Create checks the destination before any work starts (so an
// unwritable path fails at once), Commit writes it once, Abandon (deferred)
// removes what a Commit that never ran left behind. RemoveTemps is for exits
// that skip deferred calls (os.Exit on a second signal).
package outfile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"codeberg.org/stacktop/stacktop/procmaps"

	"golang.org/x/sys/unix"
)

// File is an output file (record's -o).
//
// A regular file, or a path that does not exist yet, is replaced
// atomically: the profile is written to an unnamed temporary file in the
// destination's directory (O_TMPFILE) and linked into place only once
// complete, so an interrupted stacktop never leaves a truncated profile
// under the requested name, and a SIGKILL leaves nothing at all. Where the
// filesystem has no O_TMPFILE, a named ".NAME.tmpXXXX" file is used
// instead and removed on every exit path that runs code (return, panic,
// the second Ctrl-C); only SIGKILL can leave it behind.
//
// Anything else is written in place, never replaced: a character or block
// device (/dev/null, a tty), a FIFO (opened once the profile is ready, so
// a reader gets it), or a Unix socket (connected to). A symlink is
// followed: what it points to is written (or replaced, if a regular
// file) and the link stays a link.
//
// A new file gets mode 0666 less the umask, as any file a shell
// redirection creates; a replaced file keeps its permissions and its owner
// and group, but never a setuid or setgid bit (a root stacktop must not
// leave a setuid file whose contents a target chose). A file owned by
// another user is replaced only in a directory the caller owns, and only
// if its owner can be kept (root); otherwise Create refuses it.
//
// The destination is checked before sampling starts, so an unwritable
// path fails at once.
type File struct {
	path string // as given
	kind outKind

	// Replace: the temporary file and where it goes.
	dest    string   // path with symlinks resolved
	tmp     *os.File // O_TMPFILE fd, or the named temporary file
	tmpName string   // named temporary file; "" with O_TMPFILE
	done    bool
}

type outKind int

const (
	toStdout  outKind = iota
	toReplace         // regular file or new path: atomic replace
	toInPlace         // device or FIFO: open and write
	toSocket          // Unix socket: connect and write
)

// Create checks path and prepares to write it: "-" is stdout; a
// directory, an unwritable path or a missing parent directory is an error
// now, before any sampling.
func Create(path string) (*File, error) {
	if path == "-" {
		return &File{path: path, kind: toStdout}, nil
	}
	o := &File{path: path}
	fi, err := os.Stat(path) // follows symlinks
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new path, or a dangling symlink: create what it names.
		o.kind, o.dest = toReplace, path
		if target, lerr := resolveDangling(path); lerr == nil {
			o.dest = target
		}
	case err != nil:
		return nil, fmt.Errorf("output %s: %w", path, err)
	case fi.Mode().IsRegular():
		o.kind = toReplace
		if o.dest, err = filepath.EvalSymlinks(path); err != nil {
			return nil, fmt.Errorf("output %s: %w", path, err)
		}
	case fi.IsDir():
		return nil, fmt.Errorf("output %s: is a directory; give a file name", path)
	case fi.Mode()&fs.ModeSocket != 0:
		o.kind = toSocket
	default: // device, FIFO
		o.kind = toInPlace
	}
	if o.kind != toReplace {
		if err := unix.Access(path, unix.W_OK); err != nil {
			return nil, fmt.Errorf("output %s: %w", path, err)
		}
		return o, nil
	}
	var mode fs.FileMode = 0o666 // the kernel applies the umask
	owner := -1                  // the replaced file's, to keep: -1 none
	group := -1
	if fi != nil {
		mode = fi.Mode() & fs.ModePerm // no setuid, setgid or sticky bit
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if err := mayReplace(o.dest, int(st.Uid)); err != nil {
				return nil, fmt.Errorf("output %s: %w", path, err)
			}
			owner, group = int(st.Uid), int(st.Gid)
		}
	}
	if err := o.createTemp(mode, fi != nil, owner, group); err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	return o, nil
}

// mayReplace refuses to replace dest, owned by uid, when the caller does
// not own it and does not own its directory either: a root stacktop asked
// to write over another user's file in that user's directory would
// otherwise put a root-owned file of its choosing there.
func mayReplace(dest string, uid int) error {
	me := os.Geteuid()
	if uid == me {
		return nil
	}
	var dir syscall.Stat_t
	if err := syscall.Stat(filepath.Dir(dest), &dir); err != nil {
		return err
	}
	if int(dir.Uid) != me {
		return fmt.Errorf("owned by uid %d, in a directory owned by uid %d: stacktop does not replace another user's file; remove it or write elsewhere", uid, dir.Uid)
	}
	return nil
}

// resolveDangling returns the path a dangling symlink points to (relative
// targets taken from the link's directory), following chains of links.
func resolveDangling(path string) (string, error) {
	for range 40 { // the kernel's own limit on nested links
		target, err := os.Readlink(path)
		if err != nil {
			return path, nil // not a link: this is the path to create
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", fmt.Errorf("too many levels of symbolic links")
}

// createTemp opens the temporary file in dest's directory: unnamed where
// the filesystem allows, named otherwise. keepMode says mode is an
// existing file's, set exactly (not subject to the umask); owner and group
// (-1: none) are the existing file's, given to the new one when they are
// not the caller's.
func (o *File) createTemp(mode fs.FileMode, keepMode bool, owner, group int) error {
	dir := filepath.Dir(o.dest)
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err == nil {
		o.tmp = os.NewFile(uintptr(fd), o.dest)
	} else if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		// No O_TMPFILE here (old kernels say EISDIR, some filesystems
		// EOPNOTSUPP): a named temporary file, cleaned up on exit.
		f, name, err := createNamedTemp(o.dest, uint32(mode.Perm()))
		if err != nil {
			return err
		}
		o.tmp, o.tmpName = f, name
		trackTemp(name)
	} else {
		return err
	}
	switch {
	case owner >= 0 && owner != os.Geteuid():
		// Before the chmod (a chown clears setuid bits): the file must
		// not change hands. Without the right to keep its owner the
		// replace is refused, not done with another owner.
		if err := o.tmp.Chown(owner, group); err != nil {
			o.Abandon()
			return fmt.Errorf("cannot keep the file's owner (uid %d, gid %d): %w", owner, group, err)
		}
	case group >= 0 && group != os.Getegid():
		o.tmp.Chown(-1, group) // the caller's own file: its group if allowed
	}
	if keepMode {
		if err := o.tmp.Chmod(mode); err != nil {
			o.Abandon()
			return err
		}
	}
	return nil
}

// createNamedTemp creates ".BASE.tmpXXXXXXXX" next to dest, exclusively.
func createNamedTemp(dest string, perm uint32) (*os.File, string, error) {
	for range 100 {
		name := tempName(dest)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(perm))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("no unused temporary name next to %s", dest)
}

// Commit writes the file with write, once, and puts it in place.
func (o *File) Commit(write func(io.Writer) error) error {
	if o.done {
		return fmt.Errorf("writing %s: already written", o.path)
	}
	var err error
	switch o.kind {
	case toStdout:
		bw := bufio.NewWriter(os.Stdout)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	case toInPlace:
		// No O_TRUNC: truncating a device is meaningless and a FIFO
		// cannot be truncated; O_WRONLY blocks on a FIFO until a reader
		// opens it, as a shell redirection does.
		var f *os.File
		if f, err = os.OpenFile(o.path, os.O_WRONLY, 0); err == nil {
			err = writeAndClose(f, write)
		}
	case toSocket:
		var c net.Conn
		if c, err = net.Dial("unix", o.path); err == nil {
			err = writeAndClose(c, write)
		}
	case toReplace:
		err = o.replace(write)
	}
	o.done = true
	if err != nil {
		o.removeTemp()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "write /dev/full: ..." would name the file twice
		}
		return fmt.Errorf("writing %s: %w", o.path, err)
	}
	return nil
}

// replace writes the temporary file and puts it in place of dest. An
// unnamed file is linked straight to dest when dest does not exist;
// otherwise it gets a temporary name first, which is renamed over dest
// (rename is the atomic replace; linkat never overwrites).
func (o *File) replace(write func(io.Writer) error) error {
	f := o.tmp
	o.tmp = nil
	if o.tmpName != "" {
		if err := writeAndClose(f, write); err != nil {
			return err
		}
		return os.Rename(o.tmpName, o.dest)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	err := linkFD(f, o.dest)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	for range 100 {
		name := tempName(o.dest)
		err = linkFD(f, name)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return err
		}
		o.tmpName = name
		trackTemp(name)
		if err := os.Rename(name, o.dest); err != nil {
			return err
		}
		untrackTemp(name)
		o.tmpName = ""
		return f.Close()
	}
	return fmt.Errorf("no unused temporary name next to %s", o.dest)
}

// linkFD gives the unnamed file f the name path. linkat through
// /proc/self/fd needs no privilege; AT_EMPTY_PATH (without /proc) needs
// CAP_DAC_READ_SEARCH.
func linkFD(f *os.File, path string) error {
	err := unix.Linkat(unix.AT_FDCWD, procmaps.FDPath(int(f.Fd())), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		err = unix.Linkat(int(f.Fd()), "", unix.AT_FDCWD, path, unix.AT_EMPTY_PATH)
	}
	return err
}

func tempName(dest string) string {
	dir, base := filepath.Split(dest)
	var r [4]byte
	rand.Read(r[:])
	return filepath.Join(dir, "."+base+".tmp"+hex.EncodeToString(r[:]))
}

func writeAndClose(w io.WriteCloser, write func(io.Writer) error) error {
	bw := bufio.NewWriter(w)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// abandon removes the temporary file if commit did not run.
func (o *File) Abandon() {
	if o.tmp != nil {
		o.tmp.Close()
		o.tmp = nil
	}
	o.removeTemp()
}

func (o *File) removeTemp() {
	if o.tmpName != "" {
		os.Remove(o.tmpName)
		untrackTemp(o.tmpName)
		o.tmpName = ""
	}
}

// Named temporary files alive now, removed by RemoveTemps on exits that
// skip deferred calls (os.Exit on a second signal, see withTracer).
var temps struct {
	sync.Mutex
	names map[string]bool
}

func trackTemp(name string) {
	temps.Lock()
	defer temps.Unlock()
	if temps.names == nil {
		temps.names = map[string]bool{}
	}
	temps.names[name] = true
}

func untrackTemp(name string) {
	temps.Lock()
	defer temps.Unlock()
	delete(temps.names, name)
}

// RemoveTemps removes every named temporary file still alive.
func RemoveTemps() {
	temps.Lock()
	defer temps.Unlock()
	for name := range temps.names {
		os.Remove(name)
	}
	temps.names = nil
}
