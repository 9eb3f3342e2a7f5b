package otlp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
)

func TestConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name           string
		flag, protocol string
		env            func(string) string
		want           Config
		ok             bool
	}{
		{"nothing", "", "", env(), Config{}, false},
		{"flag grpc", "collector:4317", "", env(), Config{Endpoint: "collector:4317", Protocol: ProtocolGRPC, Insecure: true}, true},
		{"flag https grpc", "https://collector:4317", "", env(), Config{Endpoint: "https://collector:4317", Protocol: ProtocolGRPC}, true},
		{"generic env http", "", "", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
			Config{Endpoint: "http://c:4318/v1development/profiles", Protocol: ProtocolHTTP}, true},
		{"signal env as is", "", "", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://p:9/x",
			"OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "http/protobuf"), Config{Endpoint: "http://p:9/x", Protocol: ProtocolHTTP}, true},
		{"flag wins", "c2:4317", "", env("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "p:1"), Config{Endpoint: "c2:4317", Protocol: ProtocolGRPC, Insecure: true}, true},
		{"flag http host", "c:4318", ProtocolHTTP, env(), Config{Endpoint: "http://c:4318/v1development/profiles", Protocol: ProtocolHTTP}, true},
		{"timeout", "c:1", "", env("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"), Config{Endpoint: "c:1", Protocol: ProtocolGRPC, Insecure: true, Timeout: 2500 * time.Millisecond}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := ConfigFromEnv(tc.flag, tc.protocol, tc.env)
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v err %v", ok, err)
			}
			if !ok {
				return
			}
			got.Headers = nil
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, _, err := ConfigFromEnv("c:1", "http/json", env()); err == nil {
		t.Error("http/json accepted")
	}
	cfg, _, err := ConfigFromEnv("c:1", "", env("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20x, X-Scope-OrgID=t1"))
	if err != nil || cfg.Headers["Authorization"] != "Bearer x" || cfg.Headers["X-Scope-OrgID"] != "t1" {
		t.Errorf("headers %v %v", cfg.Headers, err)
	}
}

func TestParseHTTPReply(t *testing.T) {
	ok, _ := proto.Marshal(&collpb.ExportProfilesServiceResponse{})
	if err := parseHTTPReply(200, "", ok); err != nil {
		t.Errorf("200: %v", err)
	}
	part, _ := proto.Marshal(&collpb.ExportProfilesServiceResponse{PartialSuccess: &collpb.ExportProfilesPartialSuccess{RejectedProfiles: 2, ErrorMessage: "bad"}})
	if err := parseHTTPReply(200, "", part); err == nil || retryable(err) || !strings.Contains(err.Error(), "rejected 2") {
		t.Errorf("partial: %v", err)
	}
	st, _ := proto.Marshal(&status.Status{Code: 14, Message: "overloaded"})
	err := parseHTTPReply(http.StatusServiceUnavailable, "7", st)
	var ee *ExportError
	if !asExport(err, &ee) || !ee.Retry || ee.After != 7*time.Second || !strings.Contains(err.Error(), "overloaded") {
		t.Errorf("503: %v", err)
	}
	if err := parseHTTPReply(400, "", []byte("bad things")); err == nil || retryable(err) || !strings.Contains(err.Error(), "bad things") {
		t.Errorf("400: %v", err)
	}
}

func asExport(err error, ee **ExportError) bool {
	e, ok := err.(*ExportError)
	*ee = e
	return ok
}

// FuzzParseHTTPReply feeds arbitrary replies of an OTLP/HTTP endpoint:
// errors are fine, panics are not, and messages stay short and valid
// UTF-8.
func FuzzParseHTTPReply(f *testing.F) {
	ok, _ := proto.Marshal(&collpb.ExportProfilesServiceResponse{PartialSuccess: &collpb.ExportProfilesPartialSuccess{RejectedProfiles: 1}})
	st, _ := proto.Marshal(&status.Status{Code: 14, Message: "overloaded"})
	f.Add(200, "", ok)
	f.Add(503, "3", st)
	f.Add(400, "x", []byte("\xff\xfe plain text"))
	f.Fuzz(func(t *testing.T, code int, retryAfter string, body []byte) {
		err := parseHTTPReply(code, retryAfter, body)
		if err != nil && len(err.Error()) > 4096 {
			t.Errorf("message of %d bytes", len(err.Error()))
		}
	})
}

// FuzzParseKeyValues: OTEL_RESOURCE_ATTRIBUTES and the header variables
// come from the environment of whoever starts stacktop; any value gives
// a map or an error, never a panic, and what parses round-trips its keys.
func FuzzParseKeyValues(f *testing.F) {
	f.Add("service.name=web,deployment.environment.name=prod")
	f.Add("Authorization=Bearer%20x")
	f.Add("=,%zz=a,k=%")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseKeyValues(s)
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || strings.Contains(k, ",") {
				t.Errorf("key %q from %q", k, s)
			}
		}
	})
}

// retryable is what package fleet asks of an export error.
func retryable(err error) bool {
	var ee *ExportError
	return errors.As(err, &ee) && ee.Retryable()
}
