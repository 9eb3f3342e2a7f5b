//go:build stacktop_testhooks

package main

import (
	"context"
	"os"
	"time"
)

// A build with the stacktop_testhooks tag (TestTopEnginePanic builds one)
// can be made to fail in ways no input causes: STACKTOP_TEST_ENGINE_PANIC=D
// panics in top's engine goroutine D after it starts.
func init() {
	if d, err := time.ParseDuration(os.Getenv("STACKTOP_TEST_ENGINE_PANIC")); err == nil {
		testEngineHook = func(ctx context.Context) {
			select {
			case <-time.After(d):
				panic("test: STACKTOP_TEST_ENGINE_PANIC")
			case <-ctx.Done():
			}
		}
	}
}
