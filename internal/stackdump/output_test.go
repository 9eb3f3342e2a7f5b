package stackdump

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/ptrace"
)

// A thread that could not be stopped says so, and where it sleeps, instead
// of claiming a truncated stack; the JSON carries the same text.
func TestBlockedThreadOutput(t *testing.T) {
	t.Parallel()
	blocked := &BlockedError{TID: 12, WaitChannel: "kernel_clone", Err: fmt.Errorf("thread 12: %w", ptrace.ErrThreadBlocked)}
	if !errors.Is(blocked, ptrace.ErrThreadBlocked) {
		t.Fatal("BlockedError does not wrap ptrace.ErrThreadBlocked")
	}
	r := &Result{PID: 11, Command: "t", Threads: []ThreadStack{{TID: 12, Name: "t", State: "D", Err: blocked}}}
	var text bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	want := "    (not stopped: in an uninterruptible sleep (kernel: kernel_clone); no user stack until it wakes)\n"
	if !strings.HasSuffix(text.String(), want) || strings.Contains(text.String(), "truncated") {
		t.Errorf("text dump:\n%s\nwant it to end with\n%s", text.String(), want)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Threads []struct {
			Error string `json:"error"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(js.Bytes(), &d); err != nil || len(d.Threads) != 1 || d.Threads[0].Error != blocked.Error() {
		t.Errorf("JSON dump %s: %v", js.String(), err)
	}
	if (&BlockedError{}).Error() == blocked.Error() {
		t.Error("the wait channel is not in the message")
	}
}
