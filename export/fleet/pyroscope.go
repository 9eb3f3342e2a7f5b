package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"codeberg.org/stacktop/stacktop/export"
	"codeberg.org/stacktop/stacktop/export/otlp"
	"codeberg.org/stacktop/stacktop/profile"
)

// PyroscopeSink sends windows to Grafana Pyroscope's HTTP ingest API as
// Pyroscope's own Go agent (grafana/pyroscope-go, upstream/remote) does:
// POST BASE/ingest?name=APP{k=v,...}&from=NS&until=NS&spyName=..&
// sampleRate=..&units=samples&aggregationType=sum, the gzipped pprof in a
// multipart form file "profile" (profile.pprof). The name is the
// application's, without a ".cpu" or ".wall" suffix: Pyroscope takes it
// as the service name and the kind of profile from the pprof sample types
// (cpu or wall nanoseconds), so one application is one service.
type PyroscopeSink struct {
	URL     string            // the server, e.g. http://pyroscope:4040
	AppName string            // e.g. myapp
	Tags    map[string]string // labels
	Rate    float64           // samples per second, for sampleRate
	Client  *http.Client      // nil: a client with a 30 s timeout
	Auth    PyroscopeAuth
}

// PyroscopeAuth is what a Pyroscope server behind an authenticating proxy,
// or a hosted one, asks of an upload. Its values are never printed.
type PyroscopeAuth struct {
	TenantID          string // X-Scope-OrgID, for a multi-tenant server
	BasicAuthUser     string // with BasicAuthPassword: HTTP basic auth
	BasicAuthPassword string
	BearerToken       string // Authorization: Bearer (not with basic auth)
}

// apply sets a's headers on req.
func (a PyroscopeAuth) apply(req *http.Request) {
	switch {
	case a.BasicAuthUser != "":
		req.SetBasicAuth(a.BasicAuthUser, a.BasicAuthPassword)
	case a.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+a.BearerToken)
	}
	if a.TenantID != "" {
		req.Header.Set("X-Scope-OrgID", a.TenantID)
	}
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

// Name is the series name Pyroscope files the profiles under, in the Go
// agent's form: the application name and the labels, sorted, in braces.
func (s *PyroscopeSink) Name() string {
	keys := make([]string, 0, len(s.Tags))
	for k := range s.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.AppName)
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

// String names the server, without credentials a URL may carry.
func (s *PyroscopeSink) String() string {
	if u, err := url.Parse(s.URL); err == nil {
		return "pyroscope " + u.Redacted()
	}
	return "pyroscope"
}

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
	until := w.Start.Add(max(w.Duration(), time.Second)) // never an empty range
	q := url.Values{}
	q.Set("name", s.Name())
	q.Set("from", strconv.FormatInt(from.UnixNano(), 10))
	q.Set("until", strconv.FormatInt(until.UnixNano(), 10))
	q.Set("spyName", "stacktop")
	q.Set("sampleRate", strconv.Itoa(int(s.Rate+0.5)))
	q.Set("units", "samples")
	q.Set("aggregationType", "sum")
	u, err := url.Parse(s.URL)
	if err != nil {
		return fmt.Errorf("pyroscope: %w", err)
	}
	u.Path = path.Join(u.Path, "ingest")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), &body)
	if err != nil {
		return fmt.Errorf("pyroscope: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	s.Auth.apply(req)
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
