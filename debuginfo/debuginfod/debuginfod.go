package debuginfod

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"codeberg.org/stacktop/stacktop/debuginfo"
	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
)

// Defaults when the environment says nothing.
const (
	DefaultTimeout = 30 * time.Second // for a server's reply headers
	DefaultMaxSize = 2 << 30          // 2 GiB, bigger than any distribution's debug file
)

// ErrNotFound means no server has a debug file for the build ID.
var ErrNotFound = errors.New("debuginfod: no server has this build ID")

// Client fetches debug files. Its zero value fetches nothing; use FromEnv.
type Client struct {
	URLs     []string      // servers, tried in order
	CacheDir string        // elfutils' layout: CacheDir/BUILDID/debuginfo
	Timeout  time.Duration // to the reply's headers, per server
	MaxSize  int64         // bytes per file
	Progress io.Writer     // unreachable servers and long downloads; nil: silent
	HTTP     *http.Client  // nil: http.DefaultTransport

	mu   sync.Mutex
	down map[string]bool // servers that could not be reached
}

// FromEnv returns a client configured as elfutils' is, or nil when
// DEBUGINFOD_URLS names no server.
func FromEnv(progress io.Writer) (*Client, error) {
	urls := strings.Fields(os.Getenv("DEBUGINFOD_URLS"))
	if len(urls) == 0 {
		return nil, nil
	}
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, fmt.Errorf("DEBUGINFOD_URLS: %q is not an http:// or https:// URL", u)
		}
	}
	c := &Client{URLs: urls, CacheDir: debuginfo.DebuginfodCacheDir(), Timeout: DefaultTimeout, MaxSize: DefaultMaxSize, Progress: progress}
	if c.CacheDir == "" {
		return nil, errors.New("debuginfod: no cache directory (set DEBUGINFOD_CACHE_PATH)")
	}
	if s := os.Getenv("DEBUGINFOD_TIMEOUT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("DEBUGINFOD_TIMEOUT: %q is not a positive number of seconds", s)
		}
		c.Timeout = time.Duration(n) * time.Second
	}
	if s := os.Getenv("DEBUGINFOD_MAXSIZE"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("DEBUGINFOD_MAXSIZE: %q is not a positive number of bytes", s)
		}
		c.MaxSize = n
	}
	return c, nil
}

func (c *Client) logf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format, args...)
	}
}

// Fetch returns the path of the debug file of buildID: from the cache if
// it is there, else downloaded from the first server that has it.
func (c *Client) Fetch(ctx context.Context, buildID string) (string, error) {
	if !debuginfo.IsBuildID(buildID) {
		return "", fmt.Errorf("debuginfod: %q is not a build ID", buildID)
	}
	dest := filepath.Join(c.CacheDir, buildID, "debuginfo")
	if st, err := os.Stat(dest); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		return dest, nil
	}
	var errs []error
	for _, server := range c.URLs {
		c.mu.Lock()
		down := c.down[server]
		c.mu.Unlock()
		if down {
			continue
		}
		err := c.fetchFrom(ctx, server, buildID, dest)
		if err == nil {
			return dest, nil
		}
		if errors.Is(err, ErrNotFound) {
			continue
		}
		var ue *unreachableError
		if errors.As(err, &ue) {
			c.mu.Lock()
			if c.down == nil {
				c.down = map[string]bool{}
			}
			c.down[server] = true
			c.mu.Unlock()
			c.logf("stacktop: debuginfod server %s unreachable (%v); going on without it\n", server, ue.err)
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return "", ErrNotFound
}

type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }

// fetchFrom downloads one file into the cache.
func (c *Client) fetchFrom(ctx context.Context, server, buildID, dest string) error {
	u := strings.TrimRight(server, "/") + "/buildid/" + buildID + "/debuginfo"
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The timeout bounds the wait for the reply's headers and any stall
	// of the body; the whole body may take longer (a large file on a slow
	// link), with progress shown.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(timeout, cancel)
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, u, nil)
	if err != nil {
		timer.Stop()
		return fmt.Errorf("debuginfod: %w", err)
	}
	req.Header.Set("User-Agent", "stacktop")
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	resp, err := hc.Do(req)
	if !timer.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		err = fmt.Errorf("no reply within %v (DEBUGINFOD_TIMEOUT)", timeout)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &unreachableError{fmt.Errorf("%s: %w", server, err)}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return ErrNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("debuginfod: %s: HTTP %d for build ID %s", server, resp.StatusCode, buildID)
	}
	max := c.MaxSize
	if max <= 0 {
		max = DefaultMaxSize
	}
	if resp.ContentLength > max {
		return fmt.Errorf("debuginfod: %s: the debug file of %s is %d bytes, over the %d-byte limit (DEBUGINFOD_MAXSIZE)", server, buildID, resp.ContentLength, max)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".debuginfo.tmp*")
	if err != nil {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	// A body that stalls for the timeout is cut: each write re-arms it.
	stall := time.AfterFunc(timeout, cancel)
	pw := &progressWriter{c: c, id: buildID, server: server, total: resp.ContentLength, start: time.Now(),
		alive: func() { stall.Reset(timeout) }}
	n, err := io.Copy(io.MultiWriter(tmp, pw), io.LimitReader(resp.Body, max+1))
	stall.Stop()
	pw.done()
	if err != nil {
		return &unreachableError{fmt.Errorf("%s: download of %s cut after %d bytes: %w", server, buildID, n, err)}
	}
	if n > max {
		return fmt.Errorf("debuginfod: %s: the debug file of %s is over the %d-byte limit (DEBUGINFOD_MAXSIZE)", server, buildID, max)
	}
	if err := Validate(tmp, buildID); err != nil {
		return fmt.Errorf("debuginfod: %s: %w", server, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	return nil
}

// Validate checks that r is an ELF file with the given build ID: what a
// server sent must be the file asked for before it enters the cache.
func Validate(r io.ReaderAt, buildID string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the reply is not a readable ELF file (debug/elf panicked: %v)", p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("the reply is not an ELF file: %w", err)
	}
	id, err := buildid.Read(f)
	if err != nil {
		return fmt.Errorf("the reply's build ID: %w", err)
	}
	if id != buildID {
		return fmt.Errorf("the reply has build ID %s, asked for %s", id, buildID)
	}
	return nil
}

// progressWriter prints a download's progress once it has lasted a
// second, four times a second at most.
type progressWriter struct {
	c          *Client
	id, server string
	total, n   int64
	start      time.Time
	last       time.Time
	shown      bool
	alive      func() // called on every write
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	p.alive()
	now := time.Now()
	if p.c.Progress != nil && now.Sub(p.start) > time.Second && now.Sub(p.last) > 250*time.Millisecond {
		p.last, p.shown = now, true
		of := ""
		if p.total > 0 {
			of = fmt.Sprintf(" of %.1f MB", float64(p.total)/1e6)
		}
		p.c.logf("\rstacktop: debuginfod: downloading %s from %s: %.1f MB%s", short(p.id), p.server, float64(p.n)/1e6, of)
	}
	return len(b), nil
}

func (p *progressWriter) done() {
	if p.shown {
		p.c.logf("\rstacktop: debuginfod: downloaded %s from %s: %.1f MB in %.1fs\n", short(p.id), p.server, float64(p.n)/1e6, time.Since(p.start).Seconds())
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12] + "..."
	}
	return id
}
