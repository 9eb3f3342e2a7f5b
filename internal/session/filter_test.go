package session

import (
	"context"
	"testing"

	"codeberg.org/stacktop/stacktop/internal/backend"
)

// replay is a backend.Source that yields its samples in one round.
type replay []backend.Sample

func (r replay) Next(_ context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	for i := range r {
		s := r[i]
		yield(&s)
	}
	return backend.Round{}, backend.ErrExited
}

func (replay) Close() error { return nil }

// TestFilterKeepsMapsChanged: the back end announces new mappings on one
// sample only; when --tid drops that sample, the next one passed on must
// carry the announcement, or the resolver keeps stale maps.
func TestFilterKeepsMapsChanged(t *testing.T) {
	src := replay{{TID: 2, MapsChanged: true}, {TID: 1}, {TID: 1}, {TID: 2}}
	var got []backend.Sample
	onlyThreads(src, []int{1}).Next(context.Background(), func(s *backend.Sample) { got = append(got, *s) })
	if len(got) != 2 {
		t.Fatalf("%d samples passed, want thread 1's 2", len(got))
	}
	if !got[0].MapsChanged || got[1].MapsChanged {
		t.Errorf("MapsChanged of the passed samples: %v, %v; want true, false", got[0].MapsChanged, got[1].MapsChanged)
	}
}
