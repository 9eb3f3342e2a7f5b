package targetfile

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nobody is a user who is neither the files' owner nor root.
var nobody = &User{UID: 65534, GID: 65534}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	write(t, filepath.Join(dir, "secret"), "root only", 0o600)
	write(t, filepath.Join(dir, "public"), "for all", 0o644)
	write(t, filepath.Join(dir, "big"), strings.Repeat("x", 100), 0o644)
	for _, link := range []struct{ name, to string }{
		{"to-secret", filepath.Join(dir, "secret")},
		{"to-null", "/dev/null"},
		{"to-self-fd", "/proc/self/fd/0"},
		{"to-public", filepath.Join(dir, "public")},
	} {
		if err := os.Symlink(link.to, filepath.Join(dir, link.name)); err != nil {
			t.Fatal(err)
		}
	}
	owned := 0
	if os.Getuid() == 0 {
		// Files of another user: refused for nobody, whatever their mode.
		write(t, filepath.Join(dir, "other"), "another user's", 0o644)
		if err := os.Chown(filepath.Join(dir, "other"), 4242, 4242); err != nil {
			t.Fatal(err)
		}
		owned = 1
	}
	for _, tc := range []struct {
		name   string
		opener Opener
		want   error
	}{
		{"fifo", Opener{}, ErrNotRegular},
		{"sock", Opener{}, ErrNotRegular},
		{"to-null", Opener{}, ErrNotRegular},
		{"to-self-fd", Opener{}, unix.ELOOP}, // a magic link is not followed
		{"big", Opener{MaxSize: 99}, ErrTooLarge},
		{"big", Opener{MaxSize: 100}, nil},
		{"secret", Opener{Reader: nobody}, ErrNotReadable},
		{"to-secret", Opener{Reader: nobody}, ErrNotReadable},
		{"secret", Opener{}, nil},
		{"public", Opener{Reader: nobody}, nil},
		{"absent", Opener{}, fs.ErrNotExist},
		{"to-public", Opener{NoSymlinks: true}, unix.ELOOP},
		{"to-public", Opener{}, nil},
		{"other", Opener{Reader: nobody}, ErrOwner},
	} {
		if tc.name == "other" && owned == 0 {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			f, err := tc.opener.Open(filepath.Join(dir, tc.name))
			if took := time.Since(start); took > DefaultDeadline {
				t.Errorf("open took %v", took)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				f.Close()
				return
			}
			if f != nil {
				f.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.name) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// TestOpenInRoot: an absolute symlink inside a root resolves in that root,
// never in ours.
func TestOpenInRoot(t *testing.T) {
	root := t.TempDir()
	host := t.TempDir()
	write(t, filepath.Join(host, "lib.so"), "host", 0o644)
	write(t, filepath.Join(root, host, "lib.so"), "root", 0o644)
	if err := os.Symlink(filepath.Join(host, "lib.so"), filepath.Join(root, "link.so")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../../"+host+"/lib.so", filepath.Join(root, "up.so")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/link.so", "/up.so"} {
		f, err := Opener{Root: root}.Open(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := make([]byte, 8)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if got := string(b[:n]); got != "root" {
			t.Errorf("%s read %q, want the root's file", name, got)
		}
	}
}

// TestOpenDeadline: an open that does not answer ends at the deadline, and
// the next open in the same directory does not wait again.
func TestOpenDeadline(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "stuck", "a"), "a", 0o644)
	write(t, filepath.Join(dir, "stuck", "b"), "b", 0o644)
	write(t, filepath.Join(dir, "fine", "c"), "c", 0o644)
	release := make(chan struct{})
	setHook(&openHook, func(name string) {
		if strings.Contains(name, "/stuck/") {
			<-release
		}
	})
	defer func() { close(release); openHook.Store(nil) }()
	o := Opener{Deadline: 50 * time.Millisecond}
	start := time.Now()
	if _, err := o.Open(filepath.Join(dir, "stuck", "a")); !errors.Is(err, ErrStalled) {
		t.Fatalf("stuck open: %v, want ErrStalled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stuck open returned after %v", took)
	}
	if note := StallNote(); !strings.Contains(note, "stuck/a") {
		t.Errorf("StallNote() = %q, want it to name the file given up", note)
	}
	var hooked atomic.Bool
	setHook(&openHook, func(string) { hooked.Store(true) })
	if _, err := o.Open(filepath.Join(dir, "stuck", "b")); !errors.Is(err, ErrStalled) || hooked.Load() {
		t.Fatalf("open beside a stuck one: %v (tried again: %v), want ErrStalled at once", err, hooked.Load())
	}
	f, err := o.Open(filepath.Join(dir, "fine", "c"))
	if err != nil {
		t.Fatalf("open elsewhere: %v", err)
	}
	f.Close()
}

// TestReadDeadline: a read of a served file that does not answer ends at
// the deadline, and the file is given up.
func TestReadDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "data", 0o644)
	f, err := Opener{Deadline: 50 * time.Millisecond}.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.served = true // as on FUSE
	b := make([]byte, 4)
	if n, err := f.ReadAt(b, 0); n != 4 || err != nil || string(b) != "data" {
		t.Fatalf("ReadAt = %d, %v, %q", n, err, b)
	}
	release := make(chan struct{})
	setHook(&readHook, func(string) { <-release })
	defer func() { close(release); readHook.Store(nil) }()
	if _, err := f.ReadAt(b, 0); !errors.Is(err, ErrStalled) {
		t.Fatalf("stuck read: %v, want ErrStalled", err)
	}
	readHook.Store(nil)
	if _, err := f.ReadAt(b, 0); !errors.Is(err, ErrStalled) {
		t.Fatalf("read after a stall: %v, want ErrStalled", err)
	}
}

func setHook(h *atomic.Pointer[func(string)], f func(string)) { h.Store(&f) }

// TestDeadlineCountsFromStart: the deadline runs from when the work
// begins, not from when its goroutine was started: work that waited for
// a CPU longer than the deadline (a loaded machine) and then answers at
// once is not given up; work that runs past the deadline is.
func TestDeadlineCountsFromStart(t *testing.T) {
	const d = 30 * time.Millisecond
	done := make(chan int, 1)
	var began atomic.Int64
	go func() {
		time.Sleep(3 * d) // not yet scheduled, as it were
		began.Store(time.Now().UnixNano())
		done <- 1
	}()
	if r, ok := awaitWork(done, &began, d); !ok || r != 1 {
		t.Errorf("work that began late and answered at once: %v, %v; want 1, true", r, ok)
	}
	stuck := make(chan int)
	began.Store(time.Now().UnixNano())
	if _, ok := awaitWork(stuck, &began, d); ok {
		t.Error("work that never answered was not given up")
	}
}
