package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"stacktop/export"
	"stacktop/export/otlp"
	"stacktop/profile"
)

// PyroscopeSink sends windows to Grafana Pyroscope's HTTP ingest API:
// POST BASE/ingest?name=APP.cpu{k=v,...}&from=..&until=..&format=pprof
// (APP.wall for a wall-clock profile, record --idle),
// the gzipped pprof in a multipart form field named "profile", as
// Pyroscope's own Go agent does.
type PyroscopeSink struct {
	URL     string            // the server, e.g. http://pyroscope:4040
	AppName string            // e.g. myapp; ".cpu" (".wall") is appended unless it has a dot
	Tags    map[string]string // labels
	Rate    float64           // samples per second, for sampleRate
	Client  *http.Client      // nil: a client with a 30 s timeout
	Headers map[string]string // e.g. X-Scope-OrgID for multi-tenant servers
}

// labelName is what Pyroscope accepts as a label name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.]*$`)

// ParseTag parses one --tag k=v.
func ParseTag(s string) (k, v string, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !labelName.MatchString(k) {
		return "", "", fmt.Errorf("--tag %q: want NAME=VALUE, NAME of letters, digits, \"_\" and \".\"", s)
	}
	if strings.ContainsAny(v, "{},=") {
		return "", "", fmt.Errorf("--tag %q: the value may not contain {, }, = or ,", s)
	}
	return k, v, nil
}

// Name is the series name Pyroscope files the profiles under: the
// application name with the kind of profile, ".cpu" on-CPU and ".wall" for
// a wall-clock profile (wall), as Pyroscope's own agents name them, so the
// two kinds never share a series.
func (s *PyroscopeSink) Name(wall bool) string {
	app := s.AppName
	if !strings.Contains(app, ".") {
		if wall {
			app += ".wall"
		} else {
			app += ".cpu"
		}
	}
	keys := make([]string, 0, len(s.Tags))
	for k := range s.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(app)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + s.Tags[k])
	}
	b.WriteByte('}')
	return b.String()
}

func (s *PyroscopeSink) String() string { return "pyroscope " + s.URL }

func (s *PyroscopeSink) Close() error {
	if s.Client != nil {
		s.Client.CloseIdleConnections()
	}
	return nil
}

// httpError is a failed upload; 429 and 5xx and network errors retry.
type httpError struct {
	retry bool
	err   error
}

func (e *httpError) Error() string   { return e.err.Error() }
func (e *httpError) Unwrap() error   { return e.err }
func (e *httpError) Retryable() bool { return e.retry }

// Send uploads the window.
func (s *PyroscopeSink) Send(ctx context.Context, w *profile.Profile) error {
	var prof bytes.Buffer
	if err := export.WritePprof(&prof, w); err != nil {
		return fmt.Errorf("pyroscope: encoding: %w", err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("profile", "profile.pprof")
	if err == nil {
		_, err = part.Write(prof.Bytes())
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return fmt.Errorf("pyroscope: encoding: %w", err)
	}
	from := w.Start
	until := w.Start.Add(w.Duration())
	q := url.Values{}
	q.Set("name", s.Name(w.Wall))
	q.Set("from", strconv.FormatInt(from.Unix(), 10))
	q.Set("until", strconv.FormatInt(max(until.Unix(), from.Unix()+1), 10))
	q.Set("format", "pprof")
	q.Set("spyName", "stacktop")
	if s.Rate > 0 {
		q.Set("sampleRate", strconv.Itoa(int(s.Rate+0.5)))
	}
	u := strings.TrimRight(s.URL, "/") + "/ingest?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &body)
	if err != nil {
		return fmt.Errorf("pyroscope: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	hc := s.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
		s.Client = hc
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &httpError{retry: true, err: fmt.Errorf("%s: %w", s, err)}
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	msg := otlp.ServerText(string(reply), 200)
	return &httpError{
		retry: resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
		err:   fmt.Errorf("%s: HTTP %d: %s", s, resp.StatusCode, msg),
	}
}
