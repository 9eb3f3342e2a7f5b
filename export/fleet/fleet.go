package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// DefaultInterval is how often a window is cut and sent.
const DefaultInterval = 15 * time.Second

// Source gives immutable snapshots of a growing profile (engine.Engine).
type Source interface {
	Snapshot() *profile.Profile
}

// Sink sends one window to a backend. Send is called from one goroutine
// at a time; an error for which Retryable(err) holds is retried.
type Sink interface {
	Send(ctx context.Context, window *profile.Profile) error
	Close() error
	String() string
}

// Retryable is implemented by errors that say whether a retry may work.
type Retryable interface{ Retryable() bool }

// Options tune an Uploader; the zero value takes the defaults.
type Options struct {
	Interval  time.Duration // default DefaultInterval
	MaxQueued int           // windows held per sink, the one in flight included; default 8
	// Back-off between retries: starts at MinBackoff, doubles, capped at
	// MaxBackoff (defaults 1 s and 10 s), with up to 20% jitter: an
	// endpoint that comes back is used again within MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// FlushTimeout bounds Close's wait for the sinks; default 10 s.
	FlushTimeout time.Duration
	Log          io.Writer // one line per outage and recovery; nil: silent
	// IsRetryable classifies a sink's error; nil uses the Retryable
	// interface.
	IsRetryable func(error) bool
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 8
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(10*time.Second, o.MinBackoff)
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// SinkStats counts one sink's windows.
type SinkStats struct {
	Name    string
	Sent    int64 // windows the backend accepted
	Samples int64 // samples in them
	Dropped int64 // windows lost: queue full during an outage, rejected, or unsent at exit
	Retries int64
	Down    bool  // the last attempt failed
	LastErr error // the last failure, nil if none yet
}

// Stats is an Uploader's counters.
type Stats struct {
	Windows int64 // windows cut
	Sinks   []SinkStats
}

// Uploader cuts windows and feeds the sinks.
type Uploader struct {
	src   Source
	opts  Options
	cut   windower
	mu    sync.Mutex // guards cut and windows
	sinks []*sinkRunner
	wg    sync.WaitGroup
	// sendCtx ends the sinks' work: at Close, after FlushTimeout.
	sendCtx    context.Context
	stopSend   context.CancelFunc
	windows    int64
	closeOnce  sync.Once
	closeStats Stats
}

// New starts one goroutine per sink; Run then feeds them.
func New(src Source, sinks []Sink, opts Options) *Uploader {
	opts.defaults()
	u := &Uploader{src: src, opts: opts}
	u.sendCtx, u.stopSend = context.WithCancel(context.Background())
	for _, s := range sinks {
		r := &sinkRunner{sink: s, opts: &u.opts, wake: make(chan struct{}, 1), flushNow: make(chan struct{})}
		r.stats.Name = s.String()
		u.sinks = append(u.sinks, r)
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			r.run(u.sendCtx)
		}()
	}
	return u
}

// Run cuts a window every Interval until ctx ends.
func (u *Uploader) Run(ctx context.Context) {
	t := time.NewTicker(u.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			u.cutAndQueue()
		}
	}
}

// cutAndQueue takes a snapshot and hands the new window to every sink.
func (u *Uploader) cutAndQueue() {
	u.mu.Lock()
	w := u.cut.cut(u.src.Snapshot())
	if w != nil {
		u.windows++
	}
	u.mu.Unlock()
	if w == nil {
		return
	}
	for _, r := range u.sinks {
		r.push(w)
	}
}

// Close cuts the last window, waits up to FlushTimeout for the sinks to
// send what they hold, stops them and returns the final counts. Windows
// still unsent count as dropped.
func (u *Uploader) Close() Stats {
	u.closeOnce.Do(func() {
		u.cutAndQueue()
		for _, r := range u.sinks {
			r.finish()
		}
		done := make(chan struct{})
		go func() { u.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(u.opts.FlushTimeout):
			u.stopSend()
			<-done
		}
		u.stopSend()
		for _, r := range u.sinks {
			r.sink.Close()
		}
		u.closeStats = u.Stats()
	})
	return u.closeStats
}

// Stats returns the counters so far.
func (u *Uploader) Stats() Stats {
	u.mu.Lock()
	st := Stats{Windows: u.windows}
	u.mu.Unlock()
	for _, r := range u.sinks {
		r.mu.Lock()
		st.Sinks = append(st.Sinks, r.stats)
		r.mu.Unlock()
	}
	return st
}

// sinkRunner is one sink's queue and sending goroutine.
type sinkRunner struct {
	sink Sink
	opts *Options
	wake chan struct{}
	// flushNow is closed by finish: a send waiting out its back-off
	// tries once more at once instead.
	flushNow chan struct{}

	mu       sync.Mutex
	queue    []*profile.Profile // waiting, oldest first; not the one in flight
	inFlight bool
	closing  bool
	stats    SinkStats
}

// push queues w, dropping the oldest waiting window when the sink already
// holds MaxQueued.
func (r *sinkRunner) push(w *profile.Profile) {
	r.mu.Lock()
	held := len(r.queue)
	if r.inFlight {
		held++
	}
	if held >= r.opts.MaxQueued && len(r.queue) > 0 {
		r.queue = r.queue[1:]
		r.stats.Dropped++
	}
	if held >= r.opts.MaxQueued && len(r.queue) == 0 {
		// MaxQueued 1 and a window in flight: the new one is dropped.
		r.stats.Dropped++
	} else {
		r.queue = append(r.queue, w)
	}
	r.mu.Unlock()
	r.signal()
}

func (r *sinkRunner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// finish tells the goroutine to return once the queue is empty.
func (r *sinkRunner) finish() {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	close(r.flushNow)
	r.signal()
}

func (r *sinkRunner) next() (w *profile.Profile, closing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return nil, r.closing
	}
	w = r.queue[0]
	r.queue[0] = nil
	r.queue = r.queue[1:]
	r.inFlight = true
	return w, false
}

func (r *sinkRunner) run(ctx context.Context) {
	defer func() {
		r.mu.Lock()
		r.stats.Dropped += int64(len(r.queue))
		r.queue = nil
		r.mu.Unlock()
	}()
	for {
		w, closing := r.next()
		if w == nil {
			if closing {
				return
			}
			select {
			case <-r.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		ok := r.deliver(ctx, w)
		r.mu.Lock()
		r.inFlight = false
		if !ok {
			r.stats.Dropped++
		}
		r.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// deliver sends w, retrying with back-off while the error is retryable.
func (r *sinkRunner) deliver(ctx context.Context, w *profile.Profile) bool {
	backoff := r.opts.MinBackoff
	flush := r.flushNow
	for {
		err := r.sink.Send(ctx, w)
		r.mu.Lock()
		if err == nil {
			if r.stats.Down {
				fmt.Fprintf(r.opts.Log, "stacktop: %s: uploads resumed\n", r.sink)
			}
			r.stats.Sent++
			r.stats.Samples += w.Samples
			r.stats.Down = false
			r.mu.Unlock()
			return true
		}
		r.stats.LastErr = err
		retry := r.retryable(err) && ctx.Err() == nil
		if !r.stats.Down {
			if retry {
				fmt.Fprintf(r.opts.Log, "stacktop: %s unreachable, retrying with back-off (holding up to %d windows): %v\n", r.sink, r.opts.MaxQueued, err)
			} else {
				fmt.Fprintf(r.opts.Log, "stacktop: %s: upload rejected, window dropped: %v\n", r.sink, err)
			}
		}
		r.stats.Down = true
		if !retry {
			r.mu.Unlock()
			return false
		}
		r.stats.Retries++
		r.mu.Unlock()
		wait := backoff + time.Duration(rand.Int64N(int64(backoff)/5+1))
		if ra := retryAfter(err); ra > wait {
			wait = min(ra, r.opts.MaxBackoff)
		}
		select {
		case <-time.After(wait):
		case <-flush:
			flush = nil // once: then back-off again until FlushTimeout
		case <-ctx.Done():
			return false
		}
		backoff = min(2*backoff, r.opts.MaxBackoff)
	}
}

func (r *sinkRunner) retryable(err error) bool {
	if r.opts.IsRetryable != nil {
		return r.opts.IsRetryable(err)
	}
	var re Retryable
	return errors.As(err, &re) && re.Retryable()
}

// retryAfter is the wait a server asked for, if the error carries one.
func retryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}
