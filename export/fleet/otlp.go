package fleet

import (
	"context"

	"codeberg.org/stacktop/stacktop/export/otlp"
	"codeberg.org/stacktop/stacktop/profile"
)

// OTLPSink sends windows as OTLP profiles through an otlp.Client.
type OTLPSink struct {
	Client otlp.Client
	// Resource describes the process at each send (with -- CMD the
	// process execs after sampling starts, so it is not known once and
	// for all).
	Resource func() otlp.Resource
}

// Send encodes the window and exports it.
func (s *OTLPSink) Send(ctx context.Context, w *profile.Profile) error {
	return s.Client.Export(ctx, otlp.Build(w, s.Resource()))
}

func (s *OTLPSink) Close() error   { return s.Client.Close() }
func (s *OTLPSink) String() string { return "otlp " + s.Client.String() }
