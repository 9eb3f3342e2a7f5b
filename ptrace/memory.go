//go:build linux

package ptrace

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
)

// Memory reads a process's memory. It needs no ptrace stop and no tracer
// thread: process_vm_readv checks ptrace-attach permission, not tracer
// identity, so any goroutine may read (bytes of a running thread's stack
// change under the reader, though). Where process_vm_readv is unavailable
// (ENOSYS, or EPERM from a seccomp filter) it falls back to pread on
// /proc/PID/mem.
type Memory struct {
	pid int

	mu      sync.Mutex
	useFile bool
	file    *os.File
}

var _ io.ReaderAt = (*Memory)(nil)

// NewMemory returns a reader of PID's address space. It opens nothing
// until the first read; Close releases the fallback file, if opened.
func NewMemory(pid int) *Memory { return &Memory{pid: pid} }

// MemoryError is a failed or short read of target memory.
type MemoryError struct {
	PID  int
	Addr uint64
	Len  int // bytes asked for
	Got  int // bytes read
	Err  error
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("read pid %d memory [%#x, %#x): got %d of %d bytes: %v",
		e.PID, e.Addr, e.Addr+uint64(e.Len), e.Got, e.Len, e.Err)
}

func (e *MemoryError) Unwrap() error { return e.Err }

// ReadAt reads len(p) bytes at address addr. A read crossing into unmapped
// memory returns the bytes before the hole, n < len(p), and a *MemoryError
// (wrapping EFAULT/EIO, or io.ErrUnexpectedEOF when the kernel gave no
// reason).
func (m *Memory) ReadAt(p []byte, addr int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	m.mu.Lock()
	useFile := m.useFile
	m.mu.Unlock()
	if !useFile {
		n, err := processVMReadv(m.pid, p, uint64(addr))
		if err != unix.ENOSYS && err != unix.EPERM {
			return n, m.result(p, addr, n, err)
		}
		m.mu.Lock()
		m.useFile = true
		m.mu.Unlock()
	}
	n, err := m.pread(p, addr)
	return n, m.result(p, addr, n, err)
}

func (m *Memory) result(p []byte, addr int64, n int, err error) error {
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &MemoryError{PID: m.pid, Addr: uint64(addr), Len: len(p), Got: n, Err: err}
}

func (m *Memory) pread(p []byte, addr int64) (int, error) {
	m.mu.Lock()
	if m.file == nil {
		f, err := procmaps.OpenMem(m.pid)
		if err != nil {
			m.mu.Unlock()
			return 0, err
		}
		m.file = f
	}
	f := m.file
	m.mu.Unlock()
	// /proc/PID/mem stops at the first unreadable page, like
	// process_vm_readv; loop over short reads of readable memory.
	// Through Control, which holds the file open meanwhile (a bare Fd()
	// could name a descriptor Close let go and another open reused).
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var rerr error
	if cerr := rc.Control(func(fd uintptr) {
		for n < len(p) {
			k, err := unix.Pread(int(fd), p[n:], addr+int64(n))
			if k > 0 {
				n += k
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				rerr = err
				return
			}
			if k <= 0 {
				rerr = io.ErrUnexpectedEOF
				return
			}
		}
	}); cerr != nil {
		return n, cerr
	}
	if rerr != nil {
		return n, rerr
	}
	return n, nil
}

// Close closes the /proc/PID/mem fallback file, if it was opened.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.file != nil {
		err := m.file.Close()
		m.file = nil
		return err
	}
	return nil
}

// processVMReadv reads len(p) bytes at addr of pid into p in one call. The
// kernel copies page by page and stops at the first unmapped page, so the
// count may be short: it then reports the count without an error, and an
// error only when nothing at all was read.
func processVMReadv(pid int, p []byte, addr uint64) (int, error) {
	local := [1]unix.Iovec{{Base: &p[0]}}
	local[0].SetLen(len(p))
	remote := [1]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}
	return unix.ProcessVMReadv(pid, local[:], remote[:], 0)
}
