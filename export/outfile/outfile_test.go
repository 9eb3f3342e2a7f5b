package outfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The -o contract on real files: regular files and new paths are replaced
// atomically, anything else is written in place and stays what it was, no
// temporary file survives, modes follow the umask or the replaced file.

var profileBytes = []byte("main;a;hot 3\nmain;b;cold 1\n")

func writeProfile(w io.Writer) error { _, err := w.Write(profileBytes); return err }

func commitTo(t *testing.T, path string) error {
	t.Helper()
	o, err := Create(path)
	if err != nil {
		return err
	}
	defer o.Abandon()
	return o.Commit(writeProfile)
}

// onlyEntries fails unless dir holds exactly the names given (no temporary
// file left).
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

func withUmask(t *testing.T, mask int) {
	old := unix.Umask(mask)
	t.Cleanup(func() { unix.Umask(old) })
}

func TestOutputNewFileUmask(t *testing.T) {
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o644}, {0o077, 0o600}, {0o002, 0o664}} {
		withUmask(t, c.umask)
		dir := t.TempDir()
		path := filepath.Join(dir, "new.folded")
		if err := commitTo(t, path); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.want {
			t.Errorf("umask %03o: new file mode %v, want %v", c.umask, fi.Mode(), c.want)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, profileBytes) {
			t.Errorf("content %q", b)
		}
		onlyEntries(t, dir, "new.folded")
	}
}

func TestOutputReplaceKeepsMode(t *testing.T) {
	withUmask(t, 0o022)
	dir := t.TempDir()
	path := filepath.Join(dir, "old.folded")
	if err := os.WriteFile(path, []byte("old contents, longer than the new ones ............"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o640)
	before, _ := os.Stat(path)
	if err := commitTo(t, path); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode() != 0o640 {
		t.Errorf("replaced file mode %v, want -rw-r----- (kept)", fi.Mode())
	}
	if os.SameFile(before, fi) {
		t.Error("the file was rewritten in place, not replaced")
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, profileBytes) {
		t.Errorf("content %q", b)
	}
	onlyEntries(t, dir, "old.folded")
}

func TestOutputSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.folded")
	link := filepath.Join(dir, "link.folded")
	os.WriteFile(target, []byte("old"), 0o640)
	os.Chmod(target, 0o640)
	if err := os.Symlink("real.folded", link); err != nil { // relative, as users make them
		t.Fatal(err)
	}
	if err := commitTo(t, link); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the symlink became %v", fi.Mode())
	}
	if fi, _ := os.Stat(target); fi.Mode() != 0o640 {
		t.Errorf("link target mode %v, want kept -rw-r-----", fi.Mode())
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, profileBytes) {
		t.Errorf("link target holds %q", b)
	}
	onlyEntries(t, dir, "link.folded", "real.folded")

	// A dangling link: the file it names is created, the link stays.
	dangling := filepath.Join(dir, "dangling.folded")
	os.Symlink("made.folded", dangling)
	if err := commitTo(t, dangling); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(dangling); fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the dangling symlink became %v", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "made.folded")); !bytes.Equal(b, profileBytes) {
		t.Errorf("the dangling link's file holds %q", b)
	}
}

func TestOutputDevices(t *testing.T) {
	needRoot(t) // a device node of our own needs mknod
	dir := t.TempDir()
	// Copies of /dev/null and /dev/full in a test directory: the test
	// checks they are still device nodes afterwards, which must not
	// depend on the real ones.
	null, full := filepath.Join(dir, "null"), filepath.Join(dir, "full")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	if err := unix.Mknod(full, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 7))); err != nil {
		t.Fatal(err)
	}
	if err := commitTo(t, null); err != nil {
		t.Errorf("-o on a null device: %v", err)
	}
	err := commitTo(t, full)
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), full) {
		t.Errorf("-o on a full device: %v, want a 'no space left' error naming it", err)
	}
	for _, p := range []string{null, full} {
		if fi, _ := os.Lstat(p); fi.Mode()&fs.ModeCharDevice == 0 {
			t.Errorf("%s is now %v, not a character device", p, fi.Mode())
		}
	}
	onlyEntries(t, dir, "full", "null")
	// The real /dev/null too (no temporary file may appear in /dev).
	if err := commitTo(t, os.DevNull); err != nil {
		t.Errorf("-o /dev/null: %v", err)
	}
	if fi, _ := os.Lstat(os.DevNull); fi.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is now %v", fi.Mode())
	}
}

func TestOutputFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A real reader process, as `cat pipe` in another terminal.
	cat := exec.Command("cat", fifo)
	var got bytes.Buffer
	cat.Stdout = &got
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	if err := commitTo(t, fifo); err != nil {
		t.Fatal(err)
	}
	if err := cat.Wait(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), profileBytes) {
		t.Errorf("the reader got %q", got.Bytes())
	}
	if fi, _ := os.Lstat(fifo); fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is now %v", fi.Mode())
	}
	onlyEntries(t, dir, "pipe")
}

func TestOutputSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	if err := commitTo(t, sock); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, profileBytes) {
		t.Errorf("the listener got %q", b)
	}
	if fi, _ := os.Lstat(sock); fi.Mode()&fs.ModeSocket == 0 {
		t.Errorf("the socket is now %v", fi.Mode())
	}
}

func TestOutputErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("-o DIR: %v", err)
	}
	if _, err := Create(filepath.Join(dir, "no", "such", "dir.folded")); err == nil {
		t.Error("-o in a missing directory: no error")
	}
	// A failed write leaves nothing behind, and the old file intact.
	path := filepath.Join(dir, "keep.folded")
	os.WriteFile(path, []byte("old"), 0o644)
	o, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Commit(func(io.Writer) error { return errors.New("boom") }); err == nil {
		t.Error("a failed write was not reported")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the old file holds %q after a failed write", b)
	}
	onlyEntries(t, dir, "keep.folded")
}

// TestOutputNamedTempCleanup covers filesystems without O_TMPFILE: the
// named temporary file is removed by abandon and by RemoveTemps (the path
// os.Exit takes on a second signal).
func TestOutputNamedTempCleanup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.folded")
	f, name, err := createNamedTemp(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	o := &File{path: path, kind: toReplace, dest: path, tmp: f, tmpName: name}
	trackTemp(name)
	o.Abandon()
	onlyEntries(t, dir)

	f, name, _ = createNamedTemp(path, 0o644)
	f.Close()
	trackTemp(name)
	RemoveTemps()
	onlyEntries(t, dir)
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// A replaced file keeps its owner and group but loses a setuid or setgid
// bit: root writing -o over a setuid file of another user's, in a
// directory root owns, leaves that user's file, mode 0755. In a directory
// the caller does not own, another user's file is refused.
func TestOutputReplaceOtherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (files of another user)")
	}
	const other = 65534 // nobody
	dir := t.TempDir()
	path := filepath.Join(dir, "p.folded")
	if err := os.WriteFile(path, []byte("old\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, other, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o4755|fs.ModeSetuid|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	o, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Commit(func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != other || st.Gid != other {
		t.Errorf("owner %d:%d after the replace, want %d:%d", st.Uid, st.Gid, other, other)
	}
	if m := fi.Mode(); m&(fs.ModeSetuid|fs.ModeSetgid) != 0 || m.Perm() != 0o755 {
		t.Errorf("mode %v after the replace, want -rwxr-xr-x (no setuid, setgid)", m)
	}

	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(theirs, "p.folded")
	if err := os.WriteFile(victim, []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{victim, theirs} {
		if err := os.Chown(p, other, other); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Create(victim); err == nil || !strings.Contains(err.Error(), "another user's file") {
		t.Errorf("another user's file in their directory: Create gave %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "theirs\n" {
		t.Errorf("the refused file changed: %q", b)
	}
}
