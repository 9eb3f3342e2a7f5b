package ptracesampler_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"codeberg.org/stacktop/stacktop/internal/backend"
	"codeberg.org/stacktop/stacktop/internal/backend/ptracesampler"
	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/internal/resolve"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// TestSourceLearnsBigFrames samples chains' "bigframe" thread (a 70 KiB
// frame above the spinning leaf) for about a second with the default
// 16 KiB window: the first sample's walk reads the callers of that frame
// from the live process, and from then on the thread's copies reach them,
// so every later walk completes from the copy alone.
func TestSourceLearnsBigFrames(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("live ptrace tests need root (or CAP_SYS_PTRACE); CI runs them as root")
	}
	tg := targets.Start(t, "chains-sframe3")
	tid := tg.ThreadNamed(t, "bigframe")
	tr := ptrace.NewTracer()
	defer tr.Close()
	src, err := ptracesampler.Open(tr, tg.PID(), ptracesampler.Options{Rate: 99, Idle: true, TIDs: []int{tid}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	mem := ptrace.NewMemory(tg.PID())
	defer mem.Close()
	cache := modules.NewModuleCache()
	defer cache.Close()
	res, err := resolve.New(tg.PID(), mem, cache, resolve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()

	type walked struct {
		missed, frames int
		complete       bool
		copied         int
	}
	var walks []walked
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, err := src.Next(ctx, func(s *backend.Sample) {
			if s.Unchanged {
				return
			}
			st := res.Walk(s)
			walks = append(walks, walked{s.StackUse.Missed, len(st.Frames), st.Complete, len(s.Stack)})
		})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	}
	if len(walks) < 5 {
		t.Fatalf("%d samples in a second, want at least 5: %+v", len(walks), walks)
	}
	if walks[0].missed == 0 || walks[0].copied != ptracesampler.DefaultStackWindow {
		t.Errorf("first sample: %+v; want the window copied and reads beyond it", walks[0])
	}
	for i, w := range walks[1:] {
		if w.missed != 0 || !w.complete || w.frames < 6 || w.copied <= ptracesampler.DefaultStackWindow {
			t.Errorf("sample %d: %+v; want a larger copy that held the whole walk", i+1, w)
		}
	}
	t.Logf("%d samples; first %+v, last %+v", len(walks), walks[0], walks[len(walks)-1])
}
