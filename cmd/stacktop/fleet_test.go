package main

import (
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	profpb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"

	"codeberg.org/stacktop/stacktop/internal/testsupport/otelcol"
	"codeberg.org/stacktop/stacktop/internal/testsupport/targets"
)

// pprofFolded reads a pprof profile into "TID;outermost;...;leaf" ->
// samples, the shape internal/testsupport/otelcol.Folded gives for OTLP.
func pprofFolded(t *testing.T, p *pprof.Profile) map[string]int64 {
	t.Helper()
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "samples" {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("no samples sample type in %v", p.SampleType)
	}
	out := map[string]int64{}
	for _, s := range p.Sample {
		var names []string
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				names = append(names, l.Function.Name)
			}
		}
		for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
			names[i], names[j] = names[j], names[i]
		}
		tid := ""
		if v := s.NumLabel["thread"]; len(v) > 0 {
			tid = strconv.FormatInt(v[0], 10)
		}
		out[tid+";"+strings.Join(names, ";")] += s.Value[idx]
	}
	return out
}

func readPprof(t *testing.T, path string) *pprof.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := pprof.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// foldedSplit is the share of a->hot among the split chains.
func foldedSplit(c map[string]int64) splitCounts {
	out := splitCounts{}
	for k, n := range c {
		switch {
		case strings.Contains(k, ";a;hot"):
			out["a;hot"] += n
		case strings.Contains(k, ";b;cold"):
			out["b;cold"] += n
		}
	}
	return out
}

func sum(c map[string]int64) (n int64) {
	for _, v := range c {
		n += v
	}
	return n
}

func diffCounts(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q: %d, local pprof %d", what, k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %q: %d, not in the local pprof", what, k, v)
		}
	}
}

// TestRecordOTLPCollector records the split target with --otlp into a real
// OpenTelemetry Collector, over gRPC and over HTTP, several windows each,
// and checks that what the Collector received is the local pprof of the
// same run (same stacks per thread, same counts), that it shows the 75/25
// split, and that the resource says which process and host it came from.
func TestRecordOTLPCollector(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("builds and runs an OpenTelemetry Collector")
	}
	tg := targets.Start(t, "split-sframe3")
	pid := strconv.Itoa(tg.PID())
	for _, tc := range []struct {
		protocol string
		endpoint func(*otelcol.Collector) string
	}{
		{"grpc", func(c *otelcol.Collector) string { return c.GRPC }},
		{"http/protobuf", func(c *otelcol.Collector) string { return "http://" + c.HTTP }},
	} {
		t.Run(strings.ReplaceAll(tc.protocol, "/", "-"), func(t *testing.T) {
			// On a loaded machine the target gets less CPU, and an on-CPU
			// profile fewer samples: record longer until there are enough
			// for the split (the equality needs no minimum).
			var got []*profpb.ProfilesData
			for _, d := range []string{"3s", "6s", "12s"} {
				col := otelcol.StartT(t, 0, 0)
				local := filepath.Join(t.TempDir(), "local.pb.gz")
				code, stderr := record(t, "-p", pid, "--rate", "499", "--duration", d, "--upload-interval", "1s",
					"--otlp", tc.endpoint(col), "--otlp-protocol", tc.protocol, "-o", local)
				if code != exitRecordOK {
					t.Fatalf("exit %d\n%s", code, stderr)
				}
				if !strings.Contains(stderr, "0 dropped") {
					t.Errorf("summary:\n%s", stderr)
				}
				want := pprofFolded(t, readPprof(t, local))
				var err error
				got, err = col.WaitFor(10*time.Second, func(got []*profpb.ProfilesData) bool {
					return sum(otelcol.Folded(got)) >= sum(want)
				})
				if err != nil {
					t.Errorf("%v\n%s", err, stderr)
				}
				if len(got) < 2 {
					t.Errorf("%d requests received, want several windows", len(got))
				}
				diffCounts(t, "Collector", otelcol.Folded(got), want)
				if _, n := foldedSplit(otelcol.Folded(got)).split(); n >= minSplitSamples {
					break
				}
			}
			foldedSplit(otelcol.Folded(got)).checkShare(t, fmt.Sprintf("what the Collector received in %d requests", len(got)))
			host, _ := os.Hostname()
			for _, pd := range got {
				attrs := otelcol.ResourceAttributes(pd)[0]
				if attrs["process.pid"] != pid || !strings.HasSuffix(attrs["process.executable.path"], "split-sframe3") ||
					attrs["host.name"] != host || attrs["process.command"] == "" || attrs["service.name"] != "unknown_service:split-sframe3" {
					t.Errorf("resource attributes %v", attrs)
				}
				if ids := otelcol.MappingBuildIDs(pd); len(ids) == 0 {
					t.Errorf("no mapping carries a build ID")
				}
			}
		})
	}
}

// TestRecordOTLPOutage starts recording while the Collector is down,
// starts it a few seconds later, and checks that nothing was lost: the
// windows held during the outage arrive, and the total equals the local
// pprof.
func TestRecordOTLPOutage(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if testing.Short() {
		t.Skip("builds and runs an OpenTelemetry Collector")
	}
	if _, err := otelcol.Binary(); err != nil {
		t.Fatal(err)
	}
	tg := targets.Start(t, "split-sframe3")
	port, err := otelcol.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "local.pb.gz")
	var (
		code   int
		stderr string
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, stderr = record(t, "-p", strconv.Itoa(tg.PID()), "--rate", "99", "--duration", "9s",
			"--upload-interval", "1s", "--otlp", "127.0.0.1:"+strconv.Itoa(port), "-o", local)
	}()
	time.Sleep(3 * time.Second)
	col := otelcol.StartT(t, port, 0)
	wg.Wait()
	if code != exitRecordOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "unreachable") || !strings.Contains(stderr, "uploads resumed") || !strings.Contains(stderr, "0 dropped") {
		t.Errorf("stderr does not tell the outage, the recovery and no loss:\n%s", stderr)
	}
	want := pprofFolded(t, readPprof(t, local))
	got, err := col.WaitFor(10*time.Second, func(got []*profpb.ProfilesData) bool {
		return sum(otelcol.Folded(got)) >= sum(want)
	})
	if err != nil {
		t.Error(err)
	}
	diffCounts(t, "Collector after an outage", otelcol.Folded(got), want)
	t.Logf("%d requests\n%s", len(got), stderr)
}

// TestRecordPyroscope records into a local HTTP endpoint that speaks
// Pyroscope's /ingest and decodes each upload as pprof: the application
// name and labels, the time range, and the samples (which add up to the
// local pprof of the same run) are checked.
func TestRecordPyroscope(t *testing.T) {
	needRoot(t)
	tg := targets.Start(t, "split-sframe3")
	var (
		mu      sync.Mutex
		uploads []*pprof.Profile
		queries []string
		errs    []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(msg string) {
			mu.Lock()
			errs = append(errs, msg)
			mu.Unlock()
			http.Error(w, msg, http.StatusBadRequest)
		}
		if r.Method != http.MethodPost || r.URL.Path != "/ingest" {
			fail("want POST /ingest, got " + r.Method + " " + r.URL.Path)
			return
		}
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			fail("content type " + r.Header.Get("Content-Type"))
			return
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		var p *pprof.Profile
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				fail(err.Error())
				return
			}
			if part.FormName() == "profile" {
				if p, err = pprof.Parse(part); err != nil {
					fail("profile: " + err.Error())
					return
				}
			}
		}
		if p == nil {
			fail("no profile field")
			return
		}
		if user, pw, ok := r.BasicAuth(); !ok || user != "ci" || pw != "s3cret-pw" || r.Header.Get("X-Scope-OrgID") != "team-a" {
			fail("credentials " + r.Header.Get("Authorization") + ", tenant " + r.Header.Get("X-Scope-OrgID"))
			return
		}
		mu.Lock()
		uploads = append(uploads, p)
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
	}))
	t.Setenv("PYROSCOPE_BASIC_AUTH_PASSWORD", "s3cret-pw")
	defer srv.Close()
	var got map[string]int64
	for _, d := range []string{"3s", "6s", "12s"} { // longer when the machine is loaded
		mu.Lock()
		uploads, queries = nil, nil
		mu.Unlock()
		local := filepath.Join(t.TempDir(), "local.pb.gz")
		code, stderr := record(t, "-p", strconv.Itoa(tg.PID()), "--rate", "499", "--duration", d, "--upload-interval", "1s",
			"--pyroscope", srv.URL, "--app-name", "split-test", "--tag", "env=ci", "--tag", "region=here",
			"--pyroscope-tenant", "team-a", "--pyroscope-user", "ci", "-o", local)
		if code != exitRecordOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		mu.Lock()
		uploads, queries, errs := uploads, queries, errs
		mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("the endpoint refused uploads: %v", errs)
		}
		if len(uploads) < 2 {
			t.Fatalf("%d uploads, want several\n%s", len(uploads), stderr)
		}
		got = map[string]int64{}
		for i, p := range uploads {
			for k, v := range pprofFolded(t, p) {
				got[k] += v
			}
			qv, _ := url.ParseQuery(queries[i])
			q := map[string]string{}
			for k, v := range qv {
				q[k] = v[0]
			}
			if q["name"] != "split-test{env=ci,region=here}" || q["spyName"] != "stacktop" || q["sampleRate"] != "499" ||
				q["units"] != "samples" || q["aggregationType"] != "sum" {
				t.Errorf("query %s", queries[i])
			}
			from, err1 := strconv.ParseInt(q["from"], 10, 64)
			until, err2 := strconv.ParseInt(q["until"], 10, 64)
			if err1 != nil || err2 != nil || until <= from || time.Since(time.Unix(0, from)) > time.Minute {
				t.Errorf("time range %s..%s (nanoseconds)", q["from"], q["until"])
			}
		}
		if strings.Contains(stderr, "s3cret-pw") {
			t.Errorf("the password is shown:\n%s", stderr)
		}
		diffCounts(t, "Pyroscope uploads", got, pprofFolded(t, readPprof(t, local)))
		if _, n := foldedSplit(got).split(); n >= minSplitSamples {
			break
		}
	}
	foldedSplit(got).checkShare(t, "the uploaded samples")
}

// TestFleetFlagErrors: bad upload flags and variables are usage errors
// (64) that say what is wrong, before anything is attached.
func TestFleetFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		env    []string
		phrase string
	}{
		{[]string{"--upload-interval", "100ms", "--otlp", "c:4317"}, nil, "--upload-interval"},
		{[]string{"--pyroscope", "ftp://x"}, nil, "http://"},
		{[]string{"--otlp", ""}, nil, "no endpoint"},
		{[]string{"--otlp", "c:1", "--otlp-protocol", "http/json"}, nil, "grpc and http/protobuf"},
		{[]string{"--tag", "bad"}, nil, "NAME=VALUE"},
		{[]string{"--pyroscope", "http://p:4040", "--pyroscope-user", "u"}, []string{"PYROSCOPE_BASIC_AUTH_PASSWORD=", "PYROSCOPE_AUTH_TOKEN="}, "no password"},
		{[]string{"--pyroscope", "http://p:4040", "--pyroscope-user", "u", "--pyroscope-password", "pw"}, []string{"PYROSCOPE_AUTH_TOKEN=t0ken"}, "give one"},
		{nil, []string{"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT=c:1", "OTEL_EXPORTER_OTLP_TIMEOUT=soon"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
	} {
		cmd := exec.Command(stacktopBin, append([]string{"record", "-p", "1"}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env...)
		r := run(t, cmd)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.phrase) {
			t.Errorf("%v %v: exit %d, want %d saying %q\n%s", tc.args, tc.env, r.code, exitUsage, tc.phrase, r.stderr)
		}
	}
}

// TestRecordOTLPCommand: with -- CMD the resource names CMD (not the shell
// that execs it) in every window, the last one (sent after CMD exited)
// included.
func TestRecordOTLPCommand(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if testing.Short() {
		t.Skip("builds and runs an OpenTelemetry Collector")
	}
	col := otelcol.StartT(t, 0, 0)
	code, stderr := record(t, "--otlp", col.GRPC, "--upload-interval", "1s", "--", targets.Path("split-sframe3"), "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var sent int
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "uploads to") {
			fmt.Sscanf(line[strings.Index(line, ": ")+2:], "%d of", &sent)
		}
	}
	got, err := col.WaitFor(10*time.Second, func(got []*profpb.ProfilesData) bool { return len(got) >= sent && sent > 0 })
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for i, pd := range got {
		attrs := otelcol.ResourceAttributes(pd)[0]
		if !strings.HasSuffix(attrs["process.executable.path"], "split-sframe3") || !strings.Contains(attrs["process.command_args"], " 2]") {
			t.Errorf("window %d of %d: resource %v", i+1, len(got), attrs)
		}
	}
}
