package debuginfod

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// fixture returns a real ELF file's bytes and its build ID.
func fixture(t testing.TB) ([]byte, string) {
	t.Helper()
	path := targets.Path("split-fp")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	id, err := buildid.Read(f)
	if err != nil || id == "" {
		t.Fatalf("build ID: %q %v", id, err)
	}
	return b, id
}

func newClient(t *testing.T, urls ...string) (*Client, *bytes.Buffer) {
	var log bytes.Buffer
	return &Client{URLs: urls, CacheDir: t.TempDir(), Timeout: 2 * time.Second, MaxSize: 1 << 30, Progress: &log}, &log
}

func TestFetch(t *testing.T) {
	file, id := fixture(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/buildid/" + id + "/debuginfo":
			w.Write(file)
		case "/buildid/" + strings.Repeat("ab", 20) + "/debuginfo":
			w.Write(file) // the wrong file for that ID
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, _ := newClient(t, srv.URL)

	p, err := c.Fetch(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(c.CacheDir, id, "debuginfo") {
		t.Errorf("cached at %s", p)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, file) {
		t.Errorf("cached file differs")
	}
	n := hits.Load()
	if _, err := c.Fetch(context.Background(), id); err != nil || hits.Load() != n {
		t.Errorf("second fetch: %v, %d requests (want the cache)", err, hits.Load()-n)
	}

	if _, err := c.Fetch(context.Background(), "0123"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown ID: %v", err)
	}
	wrong := strings.Repeat("ab", 20)
	if _, err := c.Fetch(context.Background(), wrong); err == nil || !strings.Contains(err.Error(), "asked for") {
		t.Errorf("wrong file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.CacheDir, wrong, "debuginfo")); err == nil {
		t.Errorf("a file with the wrong build ID entered the cache")
	}
	for _, bad := range []string{"../../etc", "AB", "", "abc"} {
		if _, err := c.Fetch(context.Background(), bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestFetchSizeLimit(t *testing.T) {
	file, id := fixture(t)
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.(http.Flusher).Flush() // no Content-Length
			}
			w.Write(file)
		}))
		c, _ := newClient(t, srv.URL)
		c.MaxSize = int64(len(file)) - 1
		_, err := c.Fetch(context.Background(), id)
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("chunked %v: %v", chunked, err)
		}
		srv.Close()
	}
}

func TestFetchUnreachable(t *testing.T) {
	_, id := fixture(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	c, log := newClient(t, url)
	for i := 0; i < 3; i++ {
		if _, err := c.Fetch(context.Background(), id); err == nil {
			t.Fatal("fetch from a closed server worked")
		}
	}
	if n := strings.Count(log.String(), "unreachable"); n != 1 {
		t.Errorf("want one line about the unreachable server, got %d:\n%s", n, log.String())
	}
}

func TestFetchTimeout(t *testing.T) {
	_, id := fixture(t)
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	c, log := newClient(t, srv.URL)
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	if _, err := c.Fetch(context.Background(), id); err == nil {
		t.Fatal("no error from a server that never answers")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	if !strings.Contains(log.String(), "unreachable") {
		t.Errorf("log: %s", log.String())
	}
}

func TestProgress(t *testing.T) {
	file, id := fixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(file)))
		half := len(file) / 2
		w.Write(file[:half])
		w.(http.Flusher).Flush()
		time.Sleep(1300 * time.Millisecond)
		w.Write(file[half:])
	}))
	defer srv.Close()
	c, log := newClient(t, srv.URL)
	if _, err := c.Fetch(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "downloaded") {
		t.Errorf("no progress for a slow download: %q", log.String())
	}
}

// FuzzValidate feeds arbitrary replies to the check a download passes
// before it enters the cache: errors are fine, panics are not.
func FuzzValidate(f *testing.F) {
	file, id := fixture(f)
	f.Add(file[:min(len(file), 4096)])
	f.Add([]byte("\x7fELF"))
	f.Add([]byte("<html>not found</html>"))
	f.Fuzz(func(t *testing.T, b []byte) {
		Validate(bytes.NewReader(b), id)
	})
}
