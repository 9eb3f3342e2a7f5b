// Package otelcol builds and runs, for tests and benchmarks, a real
// OpenTelemetry Collector: the nested module testdata/otelcol (core OTLP
// receiver, contrib file exporter) with the service.profilesSupport
// feature gate on. The build is cached under the user's cache directory
// in a folder named after the hash of the nested module's go.mod and
// go.sum, so it happens once per dependency set (a few minutes on a
// two-core machine, then nothing).
package otelcol

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	profpb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"
)

// moduleDir finds testdata/otelcol from this source file.
func moduleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("otelcol: cannot find the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "otelcol"), nil
}

// Binary returns the path of the built Collector, building it first if
// the cache does not hold this dependency set yet. STACKTOP_OTELCOL_CACHE
// overrides the cache directory.
func Binary() (string, error) {
	dir, err := moduleDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("otelcol: %w", err)
		}
		h.Write(b)
	}
	cache := os.Getenv("STACKTOP_OTELCOL_CACHE")
	if cache == "" {
		uc, err := os.UserCacheDir()
		if err != nil {
			uc = os.TempDir() // no HOME: cached for this boot at least
		}
		cache = filepath.Join(uc, "stacktop", "otelcol")
	}
	bin := filepath.Join(cache, hex.EncodeToString(h.Sum(nil))[:16], "otelcol")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("otelcol: %w", err)
	}
	// go test runs packages in parallel: one builds, the others wait.
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("otelcol: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("otelcol: locking the build: %w", err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := bin + ".tmp" + fmt.Sprint(os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("otelcol: building the Collector in %s: %v\n%s", dir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("otelcol: %w", err)
	}
	return bin, nil
}

// Collector is a running Collector.
type Collector struct {
	GRPC, HTTP string // host:port of the OTLP receivers
	Out        string // the file exporter's output
	cmd        *exec.Cmd
	log        syncBuffer
	done       chan error
}

// FreePort returns a loopback port nobody listens on (yet).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start builds (or takes from the cache) and starts a Collector whose
// receivers listen on grpcPort and httpPort (0: free ports) of 127.0.0.1,
// writing what it receives to a file in dir, and waits until it listens.
func Start(dir string, grpcPort, httpPort int) (*Collector, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	for _, p := range []*int{&grpcPort, &httpPort} {
		if *p == 0 {
			if *p, err = FreePort(); err != nil {
				return nil, err
			}
		}
	}
	c := &Collector{
		GRPC: fmt.Sprintf("127.0.0.1:%d", grpcPort),
		HTTP: fmt.Sprintf("127.0.0.1:%d", httpPort),
		Out:  filepath.Join(dir, "received.pb"),
		done: make(chan error, 1),
	}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    format: proto
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
`, c.GRPC, c.HTTP, c.Out)
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "--config", "file:"+cfgPath, "--feature-gates=service.profilesSupport")
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("otelcol: %w", err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{c.GRPC, c.HTTP} {
		for {
			conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case err := <-c.done:
				return nil, fmt.Errorf("otelcol exited (%v):\n%s", err, c.log.String())
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				c.Stop()
				return nil, fmt.Errorf("otelcol: %s not listening after 30 s:\n%s", addr, c.log.String())
			}
		}
	}
	return c, nil
}

// Stop ends the Collector (SIGTERM, then SIGKILL) and returns its log.
func (c *Collector) Stop() string {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(os.Interrupt)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	}
	return c.log.String()
}

// Received reads the requests the Collector wrote so far.
func (c *Collector) Received() ([]*profpb.ProfilesData, error) {
	b, err := os.ReadFile(c.Out)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseFramed(b)
}

// ParseFramed splits the file exporter's proto output: each message is
// preceded by its length, 4 bytes big-endian. A torn last record (the
// exporter still writing) is left for the next read.
func ParseFramed(b []byte) ([]*profpb.ProfilesData, error) {
	var out []*profpb.ProfilesData
	for off := 0; len(b)-off >= 4; {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n > len(b)-off-4 {
			break
		}
		var pd profpb.ProfilesData
		if err := proto.Unmarshal(b[off+4:off+4+n], &pd); err != nil {
			return out, fmt.Errorf("otelcol: record at offset %d: %w", off, err)
		}
		out = append(out, &pd)
		off += 4 + n
	}
	return out, nil
}

// WaitFor polls Received until cond holds or timeout passes.
func (c *Collector) WaitFor(timeout time.Duration, cond func([]*profpb.ProfilesData) bool) ([]*profpb.ProfilesData, error) {
	deadline := time.Now().Add(timeout)
	for {
		got, err := c.Received()
		if err != nil {
			return got, err
		}
		if cond(got) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("otelcol: condition not met after %v", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Logs returns what the Collector printed so far (racy while it runs;
// for failure messages).
func (c *Collector) Logs() string { return c.log.String() }

// StartT is Start for a test: it fails the test on error and stops the
// Collector at cleanup.
func StartT(t testing.TB, grpcPort, httpPort int) *Collector {
	t.Helper()
	c, err := Start(t.TempDir(), grpcPort, httpPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// syncBuffer is a bytes.Buffer the Collector's output copiers and the
// test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
