package targetfile

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDeadline bounds an open, and a read of a file on a file system
// served by another process (FUSE, NFS, ...). A local open takes
// microseconds; the bound only matters where a server does not answer.
const DefaultDeadline = 250 * time.Millisecond

// Reasons an open is refused, wrapped in an *Error.
var (
	ErrNotRegular  = errors.New("not a regular file")
	ErrTooLarge    = errors.New("larger than allowed")
	ErrOwner       = errors.New("owned by another user")
	ErrNotReadable = errors.New("not readable by the target's user")
	ErrStalled     = errors.New("did not answer within the deadline")
)

// Error says which file was refused and why.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return "targetfile: " + e.Path + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// User is the user a file is opened for: the target's. Only a file this
// user could read itself is opened.
type User struct {
	UID, GID uint32
}

// Opener opens files as one target would see them. The zero value opens
// paths in our own root, of any owner, under DefaultDeadline.
type Opener struct {
	// Root is the directory paths are resolved in as if it were "/": the
	// target's /proc/PID/root, or "" for ours.
	Root string
	// Reader, when set, is the user the file is read for; nil accepts a
	// file of any owner (the caller checks its identity, as for the file
	// behind a mapping).
	Reader *User
	// MaxSize bounds the file's size; 0 for no bound.
	MaxSize int64
	// Deadline replaces DefaultDeadline when not zero.
	Deadline time.Duration
	// NoSymlinks refuses a path with any symlink in it (a file the target
	// writes itself in a shared directory, like its perf map): the owner
	// and permission checks see the file, not the directories a link
	// leads through.
	NoSymlinks bool
}

// Open opens name, resolved inside o.Root without following /proc magic
// links, for reading, after the checks of the package comment. A missing
// file gives an error for which errors.Is(err, fs.ErrNotExist) holds.
func (o Opener) Open(name string) (*File, error) {
	return o.run(name, func() (int, error) { return o.pathFD(name) })
}

// OpenProcLink opens the file a /proc magic link names (map_files/START-END,
// exe): the file the process holds, wherever it lives. o.Root is not used.
func (o Opener) OpenProcLink(link string) (*File, error) {
	return o.run(link, func() (int, error) {
		fd, err := unix.Open(link, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: link, Err: err}
		}
		return fd, nil
	})
}

func (o Opener) deadline() time.Duration {
	if o.Deadline > 0 {
		return o.Deadline
	}
	return DefaultDeadline
}

// pending counts the opens and reads past their deadline that have not
// returned yet, by root and directory: a new open there would wait on the
// same server. Each holds a goroutine and an OS thread in the kernel, so
// past maxPending of them in all no new open is tried anywhere: a target
// that serves a mount of endless directories, each hanging, cannot make
// stacktop spend threads without bound.
var pending = struct {
	sync.Mutex
	n     map[string]int
	total int
}{n: map[string]int{}}

const maxPending = 64

func addPending(key string, d int) {
	pending.Lock()
	defer pending.Unlock()
	pending.total += d
	if pending.n[key] += d; pending.n[key] <= 0 {
		delete(pending.n, key)
	}
}

func isPending(key string) bool {
	pending.Lock()
	defer pending.Unlock()
	return pending.n[key] > 0 || pending.total >= maxPending
}

// giveUp counts work past its deadline as pending under key until done
// answers, and the file as given up (StallNote).
func giveUp[T any](key, name string, done <-chan T) {
	stalled(name)
	addPending(key, 1)
	go func() {
		<-done
		addPending(key, -1)
	}()
}

// stalls counts the files given up at their deadline, for StallNote.
var stalls struct {
	sync.Mutex
	n     int
	first string
}

func stalled(name string) {
	stalls.Lock()
	defer stalls.Unlock()
	if stalls.n++; stalls.n == 1 {
		stalls.first = name
	}
}

// StallNote is a one-line note for the user when files were given up at
// their deadline in this process (by an open or a read), "" when none
// were: the frames in them may lack names, lines or whole stacks.
func StallNote() string {
	stalls.Lock()
	defer stalls.Unlock()
	switch stalls.n {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("%s did not answer within %v and was given up (a FUSE or network mount?): frames there may lack names", stalls.first, DefaultDeadline)
	}
	return fmt.Sprintf("%d files did not answer within %v and were given up, the first %s (a FUSE or network mount?): frames there may lack names", stalls.n, DefaultDeadline, stalls.first)
}

// openHook, when a test sets it, runs before each open's system calls:
// a file system that does not answer, on demand.
var openHook atomic.Pointer[func(name string)]

// run opens name with openPath (an O_PATH descriptor) on a goroutine of
// its own, checks and reopens the file, and gives up at the deadline.
func (o Opener) run(name string, openPath func() (int, error)) (*File, error) {
	key := o.Root + "\x00" + path.Dir(name)
	if isPending(key) {
		return nil, &Error{name, ErrStalled}
	}
	type result struct {
		f   *File
		err error
	}
	done := make(chan result, 1)
	var began atomic.Int64
	go func() {
		began.Store(time.Now().UnixNano())
		if hook := openHook.Load(); hook != nil {
			(*hook)(name)
		}
		f, err := o.open(name, openPath)
		done <- result{f, err}
	}()
	r, ok := awaitWork(done, &began, o.deadline())
	if !ok {
		late := make(chan result, 1)
		go func() { // a late answer's file is closed
			r := <-done
			if r.f != nil {
				r.f.Close()
			}
			late <- r
		}()
		giveUp(key, name, late)
		return nil, &Error{name, ErrStalled}
	}
	return r.f, r.err
}

// awaitWork waits for done, for d counted from when the goroutine that
// answers on it began its work (began, Unix nanoseconds; 0 before), not
// from when it was started: on a machine loaded to tens of runnable
// threads a CPU, a goroutine can wait long for its first slice, and the
// file is not at fault. Local opens take microseconds once they run; a
// file system that does not answer keeps them waiting past any slice.
// ok is false once the work has run d without an answer.
func awaitWork[T any](done <-chan T, began *atomic.Int64, d time.Duration) (r T, ok bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case r = <-done:
			return r, true
		case <-timer.C:
		}
		at := began.Load()
		if at == 0 {
			timer.Reset(d) // not begun: the machine is busy, not the file
			continue
		}
		left := time.Until(time.Unix(0, at).Add(d))
		if left <= 0 {
			return r, false
		}
		timer.Reset(left)
	}
}

func (o Opener) open(name string, openPath func() (int, error)) (*File, error) {
	pfd, err := openPath()
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if err := o.check(&st); err != nil {
		return nil, &Error{name, err}
	}
	// The descriptor names the inode just checked; reopening it through
	// /proc/self/fd cannot reach another file, whatever the path names now.
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := &File{f: os.NewFile(uintptr(fd), name), Stat: st, deadline: o.deadline(), key: o.Root + "\x00" + path.Dir(name)}
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil || servedFS(int64(sfs.Type)) {
		f.served = true
	}
	f.mappable = !f.served && st.Uid == 0 && st.Mode&0o022 == 0 && o.Reader != nil && o.Reader.UID != 0
	return f, nil
}

// check applies o's rules to the file st describes.
func (o Opener) check(st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w (%s)", ErrNotRegular, fileType(st.Mode))
	}
	if o.MaxSize > 0 && st.Size > o.MaxSize {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, st.Size, o.MaxSize)
	}
	if u := o.Reader; u != nil {
		if st.Uid != 0 && st.Uid != u.UID {
			return fmt.Errorf("%w (uid %d)", ErrOwner, st.Uid)
		}
		if !canRead(st, u) {
			return fmt.Errorf("%w (mode %04o, uid %d, gid %d)", ErrNotReadable, st.Mode&0o7777, st.Uid, st.Gid)
		}
	}
	return nil
}

// canRead applies the permission bits as the kernel would for u, without
// supplementary groups (a file readable only through one is refused) and
// without ACLs. Root reads everything.
func canRead(st *unix.Stat_t, u *User) bool {
	switch {
	case u.UID == 0:
		return true
	case st.Uid == u.UID:
		return st.Mode&0o400 != 0
	case st.Gid == u.GID:
		return st.Mode&0o040 != 0
	}
	return st.Mode&0o004 != 0
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	}
	return fmt.Sprintf("type %o", mode&unix.S_IFMT)
}

// servedFS reports whether a file system's reads wait on a server: another
// process (FUSE) or another machine.
func servedFS(magic int64) bool {
	switch magic {
	case unix.FUSE_SUPER_MAGIC, unix.NFS_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC,
		unix.V9FS_MAGIC, unix.CEPH_SUPER_MAGIC, unix.AFS_FS_MAGIC, unix.CODA_SUPER_MAGIC:
		return true
	}
	return false
}

// pathFD opens name inside o.Root with O_PATH.
func (o Opener) pathFD(name string) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS}
	if o.NoSymlinks {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	dir := unix.AT_FDCWD
	if o.Root != "" {
		d, err := unix.Open(o.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: o.Root, Err: err}
		}
		defer unix.Close(d)
		dir = d
		how.Resolve |= unix.RESOLVE_IN_ROOT
	}
	fd, err := unix.Openat2(dir, name, how)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6: symlinks resolve in our root; the checks on
		// the file reached still hold.
		flags := unix.O_PATH | unix.O_CLOEXEC
		if o.NoSymlinks {
			flags |= unix.O_NOFOLLOW // the last component at least
		}
		fd, err = unix.Open(o.Root+name, flags, 0)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: o.Root + name, Err: err}
	}
	return fd, nil
}
