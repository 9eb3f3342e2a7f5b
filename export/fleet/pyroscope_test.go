package fleet

import (
	"bufio"
	"context"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"codeberg.org/stacktop/stacktop/profile"
)

func TestPyroscopeName(t *testing.T) {
	s := &PyroscopeSink{AppName: "web", Tags: map[string]string{"region": "eu", "env": "prod"}}
	if got := s.Name(); got != "web{env=prod,region=eu}" {
		t.Errorf("name %q", got)
	}
	s = &PyroscopeSink{AppName: "web"}
	if got := s.Name(); got != "web{}" {
		t.Errorf("name %q", got)
	}
	for _, bad := range []string{"noequals", "=v", "1x=v", "k=a,b", "k={x}", "k y=v"} {
		if _, _, err := ParseTag(bad); err == nil {
			t.Errorf("ParseTag(%q) accepted", bad)
		}
	}
	if k, v, err := ParseTag("service_name=my.app"); err != nil || k != "service_name" || v != "my.app" {
		t.Errorf("ParseTag: %q %q %v", k, v, err)
	}
}

// ingestRequest is what a Pyroscope server sees of one upload.
type ingestRequest struct {
	method, path string
	query        url.Values
	header       http.Header
	parts        []ingestPart
}

type ingestPart struct {
	formName, fileName, contentType string
	body                            []byte
}

func readIngest(t *testing.T, r *http.Request) ingestRequest {
	t.Helper()
	in := ingestRequest{method: r.Method, path: r.URL.Path, query: r.URL.Query(), header: r.Header}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("content type %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return in
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		in.parts = append(in.parts, ingestPart{p.FormName(), p.FileName(), p.Header.Get("Content-Type"), b})
	}
}

// TestPyroscopeRequestLikeGoAgent: an upload has the form of the one
// Pyroscope's Go agent sends for the same application, labels, window
// and credentials (testdata/go-agent-ingest.http, from its source): the
// same path, query parameters and value forms, headers and multipart
// parts. Only what names the sender (spyName) and its rate differ.
func TestPyroscopeRequestLikeGoAgent(t *testing.T) {
	f, err := os.Open("testdata/go-agent-ingest.http")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	agentReq, err := http.ReadRequest(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	agent := readIngest(t, agentReq)

	var ours ingestRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ours = readIngest(t, r)
	}))
	defer srv.Close()
	start := time.Unix(1700000000, 0)
	w := profile.New(42, "web", start, 10*time.Millisecond)
	for _, at := range []time.Duration{0, 10 * time.Second} {
		w.Add(profile.Sample{TID: 42, Time: start.Add(at), Frames: []profile.Frame{{PC: 0x1000, Function: "main"}}})
	}
	sink := &PyroscopeSink{URL: srv.URL, AppName: "web", Tags: map[string]string{"env": "prod", "region": "eu"}, Rate: 99,
		Auth: PyroscopeAuth{TenantID: "tenant-a", BasicAuthUser: "user", BasicAuthPassword: "s3cret"}}
	if err := sink.Send(context.Background(), w); err != nil {
		t.Fatal(err)
	}

	if ours.method != agent.method || ours.path != agent.path {
		t.Errorf("%s %s, the agent sends %s %s", ours.method, ours.path, agent.method, agent.path)
	}
	if got, want := slices.Sorted(maps.Keys(ours.query)), slices.Sorted(maps.Keys(agent.query)); !slices.Equal(got, want) {
		t.Errorf("query parameters %v, the agent sends %v", got, want)
	}
	for _, k := range []string{"name", "from", "until", "units", "aggregationType"} {
		if ours.query.Get(k) != agent.query.Get(k) {
			t.Errorf("%s=%q, the agent sends %q", k, ours.query.Get(k), agent.query.Get(k))
		}
	}
	if ours.query.Get("spyName") != "stacktop" || ours.query.Get("sampleRate") != "99" {
		t.Errorf("spyName=%q sampleRate=%q, want stacktop and 99", ours.query.Get("spyName"), ours.query.Get("sampleRate"))
	}
	for _, h := range []string{"Authorization", "X-Scope-Orgid"} {
		if ours.header.Get(h) != agent.header.Get(h) {
			t.Errorf("header %s %q, the agent sends %q", h, ours.header.Get(h), agent.header.Get(h))
		}
	}
	if len(ours.parts) != len(agent.parts) {
		t.Fatalf("%d multipart parts, the agent sends %d", len(ours.parts), len(agent.parts))
	}
	for i, p := range agent.parts {
		o := ours.parts[i]
		if o.formName != p.formName || o.fileName != p.fileName || o.contentType != p.contentType {
			t.Errorf("part %d: %q %q %q, the agent sends %q %q %q", i, o.formName, o.fileName, o.contentType, p.formName, p.fileName, p.contentType)
		}
	}
	prof, err := pprof.ParseData(ours.parts[0].body)
	if err != nil {
		t.Fatalf("the profile part is not pprof: %v", err)
	}
	if prof.SampleType[len(prof.SampleType)-1].Type != "cpu" {
		t.Errorf("sample types %v: the server reads the profile's kind from them", prof.SampleType)
	}
}

// TestPyroscopeAuth: a bearer token goes as Authorization: Bearer, and
// no credential appears in what the sink prints of itself or its errors.
func TestPyroscopeAuth(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("urluser", "urlsecret")
	sink := &PyroscopeSink{URL: u.String(), AppName: "web", Auth: PyroscopeAuth{BearerToken: "t0ken"}}
	w := profile.New(42, "web", time.Now(), 10*time.Millisecond)
	err := sink.Send(context.Background(), w)
	if auth != "Bearer t0ken" {
		t.Errorf("Authorization %q, want the bearer token", auth)
	}
	if err == nil {
		t.Fatal("a 403 was taken for success")
	}
	for _, s := range []string{sink.String(), err.Error()} {
		for _, secret := range []string{"t0ken", "urlsecret"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q shows a credential", s)
			}
		}
	}
}
