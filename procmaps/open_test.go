package procmaps

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/targetfile"
)

// copyRun copies /bin/sleep to dir/name, runs it and returns it with the
// executable mapping of its file.
func copyRun(t *testing.T, dir, name string) (*exec.Cmd, *Mapping) {
	t.Helper()
	path := filepath.Join(dir, name)
	copyExecutable(t, "/bin/sleep", path)
	cmd := exec.Command(path, "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ms, err := ReadMaps(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ms {
			if ms[i].Path == path && ms[i].IsExec() {
				return cmd, &ms[i]
			}
		}
	}
	t.Fatalf("no executable mapping of %s", path)
	return nil, nil
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Skip(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenDeleted: a deleted executable is opened through map_files only.
func TestOpenDeleted(t *testing.T) {
	dir := t.TempDir()
	cmd, m := copyRun(t, dir, "doomed")
	if err := os.Remove(m.Path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openMapping(cmd.Process.Pid, m, false); err == nil {
		t.Error("deleted file opened without map_files")
	}
	if os.Geteuid() == 0 {
		f, src, err := OpenMapping(cmd.Process.Pid, m)
		if err != nil || src != SourceMapFiles {
			t.Fatalf("OpenMapping as root: %v via %v", err, src)
		}
		f.Close()
	}
}

// TestReplacedExecutableNotTrusted: a file renamed over the mapped one (a
// package upgrade) is another inode, refused with a *MismatchError.
func TestReplacedExecutableNotTrusted(t *testing.T) {
	dir := t.TempDir()
	cmd, m := copyRun(t, dir, "prog")
	copyExecutable(t, "/bin/sleep", filepath.Join(dir, "other"))
	if err := os.Rename(filepath.Join(dir, "other"), m.Path); err != nil {
		t.Fatal(err)
	}
	f, src, err := openMapping(cmd.Process.Pid, m, false)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("replaced file opened via %v (err %v), want a *MismatchError", src, err)
	}
	if mm.WantIno != m.Inode || mm.GotIno == m.Inode {
		t.Errorf("mismatch %+v for mapping inode %d", mm, m.Inode)
	}
	if os.Geteuid() == 0 {
		f, src, err := OpenMapping(cmd.Process.Pid, m)
		if err != nil || src != SourceMapFiles {
			t.Fatalf("OpenMapping as root: %v via %v", err, src)
		}
		f.Close()
	}
}

// TestOpenDeletedFIFO: a target that deletes a mapped file and puts a FIFO
// at its path cannot make the path fallback block (an open of a FIFO
// waits for a writer): the FIFO is refused at once, and so are a symlink
// to a device and a socket.
func TestOpenDeletedFIFO(t *testing.T) {
	dir := t.TempDir()
	cmd, m := copyRun(t, dir, "doomed")
	for _, plant := range []func(string) error{
		func(p string) error { return unix.Mkfifo(p, 0o644) },
		func(p string) error { return os.Symlink("/dev/zero", p) },
	} {
		if err := os.Remove(m.Path); err != nil {
			t.Fatal(err)
		}
		if err := plant(m.Path); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			f, _, err := openMapping(cmd.Process.Pid, m, false)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, targetfile.ErrNotRegular) {
				t.Errorf("opening the mapping through its path: %v, want a refusal (not a regular file)", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("opening the mapping blocked on what its path names now")
		}
	}
}
