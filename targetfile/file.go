package targetfile

import (
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// File is a file opened by an Opener. Its ReadAt keeps to the deadline
// on a file system served by another process; elsewhere it is a pread.
type File struct {
	f *os.File
	// Stat is the file as checked at the open.
	Stat     unix.Stat_t
	served   bool        // on FUSE or a network file system
	stalled  atomic.Bool // a read passed its deadline: the file is given up
	deadline time.Duration
	key      string // its root and directory, for pending
	mappable bool   // see Mappable
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt. On a served file
// system a read past the deadline returns ErrStalled, and so does every
// later one: a server that stopped answering once is not waited for again.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if !f.served {
		return f.f.ReadAt(p, off)
	}
	if f.stalled.Load() {
		return 0, &Error{f.f.Name(), ErrStalled}
	}
	type result struct {
		b   []byte
		n   int
		err error
	}
	done := make(chan result, 1)
	var began atomic.Int64
	go func() {
		began.Store(time.Now().UnixNano())
		// Into a buffer of its own: one given up may still be written.
		b := make([]byte, len(p))
		if hook := readHook.Load(); hook != nil {
			(*hook)(f.f.Name())
		}
		n, err := f.f.ReadAt(b, off)
		done <- result{b, n, err}
	}()
	r, ok := awaitWork(done, &began, f.deadline)
	if !ok {
		f.stalled.Store(true)
		giveUp(f.key, f.f.Name(), done)
		return 0, &Error{f.f.Name(), ErrStalled}
	}
	copy(p, r.b[:r.n])
	return r.n, r.err
}

// readHook, when a test sets it, runs before each read of a served file.
var readHook atomic.Pointer[func(name string)]

// Name is the path the file was opened by.
func (f *File) Name() string { return f.f.Name() }

// Fd is the file's descriptor, valid until Close.
func (f *File) Fd() uintptr { return f.f.Fd() }

// Identity is the file's device, inode and change time at the open: what
// names its contents for a cache.
func (f *File) Identity() (dev, ino, ctimeNS uint64) {
	return uint64(f.Stat.Dev), f.Stat.Ino, uint64(f.Stat.Ctim.Nano())
}

// Size is the file's size at the open.
func (f *File) Size() int64 { return f.Stat.Size }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Mappable returns the *os.File when mapping the file is safe: on a local
// file system (a page fault on FUSE waits for its server, with no
// deadline), owned by root and opened for a target that is not root. A
// process that can write a mapped file can truncate it, and a read of the
// mapping past the new end is a SIGBUS that ends the program: a root
// target (in a container without a user namespace, say) owns root's files
// too, and a file opened with no reader named has an owner unchecked.
func (f *File) Mappable() *os.File {
	if !f.mappable {
		return nil
	}
	return f.f
}
