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
		if !f.stalled.Swap(true) {
			stalled(f.f.Name())
		}
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

// Size is the file's size at the open.
func (f *File) Size() int64 { return f.Stat.Size }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Mappable returns the *os.File when mapping the file is safe: on a local
// file system (a page fault on FUSE waits for its server, with no
// deadline) and owned by root. A user who owns a mapped file can truncate
// it, and a read of the mapping past the new end is a SIGBUS that ends
// the program; a file that no target can write has no such end.
func (f *File) Mappable() *os.File {
	if f.served || f.Stat.Uid != 0 {
		return nil
	}
	return f.f
}

// OS returns the *os.File, for callers that need one (Seek, Stat). Reads
// through it are not bounded by the deadline.
func (f *File) OS() *os.File { return f.f }
