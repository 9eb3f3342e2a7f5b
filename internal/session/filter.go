package session

import (
	"context"
	"slices"

	"codeberg.org/stacktop/stacktop/internal/backend"
)

// threadFilter passes on the samples of some threads only, for a back end
// that samples every thread of the process (perf: the kernel's events
// follow all of them).
type threadFilter struct {
	backend.Source
	tids []int
	// mapsChanged keeps a dropped sample's MapsChanged for the next
	// sample passed on: the back end announces new mappings once.
	mapsChanged *bool
}

// onlyThreads wraps src to yield only the samples of tids; nil tids keeps
// src as it is.
func onlyThreads(src backend.Source, tids []int) backend.Source {
	if len(tids) == 0 {
		return src
	}
	return threadFilter{Source: src, tids: tids, mapsChanged: new(bool)}
}

func (f threadFilter) Next(ctx context.Context, yield func(*backend.Sample)) (backend.Round, error) {
	return f.Source.Next(ctx, func(s *backend.Sample) {
		if !slices.Contains(f.tids, s.TID) {
			*f.mapsChanged = *f.mapsChanged || s.MapsChanged
			return
		}
		if *f.mapsChanged {
			s.MapsChanged, *f.mapsChanged = true, false
		}
		yield(s)
	})
}
