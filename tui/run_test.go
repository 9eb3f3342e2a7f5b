package tui

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// runAsync runs Run and fails the test if it has not returned within a
// generous bound: a liveness check, not a timing assertion.
func runAsync(t *testing.T, ctx context.Context, src Source, opt Options) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, src, opt) }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// polled counts polls and signals the first one.
type polled struct {
	once  sync.Once
	first chan struct{}
	st    Status
}

func (p *polled) Snapshot() Status {
	p.once.Do(func() { close(p.first) })
	return p.st
}

func TestRunReturnsOnCancel(t *testing.T) {
	pr, pw := io.Pipe() // input that never sends a key
	defer pw.Close()
	src := &polled{first: make(chan struct{}), st: status(hotCold())}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-src.first; cancel() }()
	out := &targets.LockedBuffer{}
	err := runAsync(t, ctx, src, Options{Input: pr, Output: out, Refresh: time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel = %v, want context.Canceled", err)
	}
}

func TestRunQuitKey(t *testing.T) {
	src := &polled{first: make(chan struct{}), st: status(hotCold())}
	pr, pw := io.Pipe()
	go func() {
		<-src.first
		pw.Write([]byte("q"))
	}()
	defer pw.Close()
	out := &targets.LockedBuffer{}
	err := runAsync(t, context.Background(), src, Options{Input: pr, Output: out, NoColor: true})
	if err != nil {
		t.Errorf("Run after q = %v, want nil", err)
	}
	if !strings.Contains(out.String(), "stacktop top") {
		t.Errorf("nothing drawn: %q", out.String())
	}
}

func TestRunReturnsSourcePanic(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	src := sourceFunc(func() Status { panic("sampler state corrupt") })
	err := runAsync(t, context.Background(), src, Options{Input: pr, Output: &targets.LockedBuffer{}})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "sampler state corrupt" {
		t.Fatalf("Run = %v, want *PanicError", err)
	}
}

// A panic in View (here: a Source whose Status makes rendering fail) is
// recorded and quits the program.
type badErr struct{}

func (badErr) Error() string { panic("Error() exploded") }

func TestRunReturnsViewPanic(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	st := status(hotCold())
	st.Err = badErr{}
	err := runAsync(t, context.Background(), sourceFunc(func() Status { return st }),
		Options{Input: pr, Output: &targets.LockedBuffer{}, Refresh: time.Hour})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "Error() exploded" {
		t.Fatalf("Run = %v, want *PanicError from View", err)
	}
}

// sourceFunc adapts a function to Source.
type sourceFunc func() Status

// Snapshot calls f.
func (f sourceFunc) Snapshot() Status { return f() }
