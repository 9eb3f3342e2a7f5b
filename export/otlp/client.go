package otlp

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
)

// Protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// exportMethod is the gRPC method of the profiles service. The slim
// modules name their package opentelemetry.proto.slim.*, but the wire
// service is the specification's.
const exportMethod = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

// httpPath is the profiles path of an OTLP/HTTP receiver.
const httpPath = "/v1development/profiles"

// maxReplyBytes bounds what is read of an HTTP reply.
const maxReplyBytes = 1 << 20

// Config says where and how to send.
type Config struct {
	// Endpoint is host:port or a URL. For HTTP it is the full URL of the
	// profiles path (see ConfigFromEnv for how it is completed).
	Endpoint string
	Protocol string // ProtocolGRPC or ProtocolHTTP
	Insecure bool   // gRPC without TLS (implied by http:// and by no scheme)
	Headers  map[string]string
	Timeout  time.Duration // per export; 10 s if zero
}

// ConfigFromEnv completes a configuration the way OpenTelemetry SDKs
// read their environment: endpoint (the --otlp flag, else
// OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT used as is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with the profiles path appended for HTTP),
// protocol (the flag, else OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else grpc), headers
// (OTEL_EXPORTER_OTLP_HEADERS and _PROFILES_HEADERS), insecure
// (OTEL_EXPORTER_OTLP_INSECURE) and timeout (OTEL_EXPORTER_OTLP_TIMEOUT,
// milliseconds). ok is false when no endpoint is set anywhere.
func ConfigFromEnv(flagEndpoint, flagProtocol string, getenv func(string) string) (cfg Config, ok bool, err error) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				return v
			}
		}
		return ""
	}
	cfg.Protocol = flagProtocol
	if cfg.Protocol == "" {
		cfg.Protocol = first("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolGRPC
	}
	if cfg.Protocol != ProtocolGRPC && cfg.Protocol != ProtocolHTTP {
		return cfg, false, fmt.Errorf("OTLP protocol %q: stacktop speaks grpc and http/protobuf", cfg.Protocol)
	}
	appendPath := true
	switch {
	case flagEndpoint != "":
		cfg.Endpoint = flagEndpoint
		appendPath = !hasPath(flagEndpoint)
	case getenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT") != "":
		cfg.Endpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"))
		appendPath = false
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		cfg.Endpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	default:
		return cfg, false, nil
	}
	if cfg.Protocol == ProtocolHTTP {
		if !strings.Contains(cfg.Endpoint, "://") {
			cfg.Endpoint = "http://" + cfg.Endpoint
		}
		if appendPath {
			cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/") + httpPath
		}
	} else {
		cfg.Insecure = !strings.HasPrefix(cfg.Endpoint, "https://")
		if v := strings.ToLower(first("OTEL_EXPORTER_OTLP_PROFILES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")); v == "true" {
			cfg.Insecure = true
		}
	}
	cfg.Headers = map[string]string{}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_PROFILES_HEADERS"} {
		h, err := ParseKeyValues(getenv(k))
		if err != nil {
			return cfg, false, fmt.Errorf("%s: %w", k, err)
		}
		for hk, hv := range h {
			cfg.Headers[hk] = hv
		}
	}
	if err := CheckEndpoint(cfg.Endpoint); err != nil {
		return cfg, false, err
	}
	if ms := first("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); ms != "" {
		n, err := strconv.Atoi(ms)
		if err != nil || n <= 0 {
			return cfg, false, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT: %q is not a positive number of milliseconds", ms)
		}
		cfg.Timeout = time.Duration(n) * time.Millisecond
	}
	return cfg, true, nil
}

func hasPath(endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && u.Host != "" && u.Path != "" && u.Path != "/"
}

// ParseKeyValues parses the W3C-baggage-like lists of
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS:
// key=value pairs separated by commas, values percent-encoded.
func ParseKeyValues(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		out[k] = dv
	}
	return out, nil
}

// Client sends export requests to one endpoint. It is used by one
// goroutine at a time.
type Client interface {
	Export(ctx context.Context, req *collpb.ExportProfilesServiceRequest) error
	Close() error
	String() string // the endpoint, for messages
}

// ExportError is a failed export. Retryable says whether sending the same
// request later may succeed (the endpoint is down or overloaded); After,
// when not zero, is how long the server asked to wait.
type ExportError struct {
	Retry bool
	After time.Duration
	Err   error
}

func (e *ExportError) Error() string             { return e.Err.Error() }
func (e *ExportError) Unwrap() error             { return e.Err }
func (e *ExportError) Retryable() bool           { return e.Retry }
func (e *ExportError) RetryAfter() time.Duration { return e.After }

// NewClient returns a client for cfg. gRPC connects lazily: an endpoint
// that is down shows in Export's error, not here.
func NewClient(cfg Config) (Client, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	switch cfg.Protocol {
	case ProtocolHTTP:
		return &httpClient{cfg: cfg, hc: &http.Client{Timeout: cfg.Timeout}}, nil
	case ProtocolGRPC, "":
		target := cfg.Endpoint
		for _, p := range []string{"http://", "https://", "grpc://"} {
			target = strings.TrimPrefix(target, p)
		}
		target = strings.TrimRight(target, "/")
		creds := insecure.NewCredentials()
		if !cfg.Insecure {
			creds = credentials.NewTLS(&tls.Config{})
		}
		// gRPC's own reconnection back-off grows to 2 minutes by default:
		// after a long outage the channel would keep failing fast long
		// after the endpoint is back. 5 s keeps it under fleet's retries.
		conn, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
				MinConnectTimeout: 5 * time.Second,
			}))
		if err != nil {
			return nil, fmt.Errorf("otlp: %s: %w", cfg.Endpoint, err)
		}
		return &grpcClient{cfg: cfg, conn: conn}, nil
	}
	return nil, fmt.Errorf("otlp: unknown protocol %q", cfg.Protocol)
}

type grpcClient struct {
	cfg  Config
	conn *grpc.ClientConn
}

func (c *grpcClient) String() string { return "grpc " + c.cfg.Endpoint }
func (c *grpcClient) Close() error   { return c.conn.Close() }

func (c *grpcClient) Export(ctx context.Context, req *collpb.ExportProfilesServiceRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if len(c.cfg.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.cfg.Headers))
	}
	resp := &collpb.ExportProfilesServiceResponse{}
	err := c.conn.Invoke(ctx, exportMethod, req, resp)
	if err != nil {
		st := grpcstatus.Convert(err)
		switch st.Code() {
		case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded,
			codes.Canceled, codes.OutOfRange, codes.DataLoss:
			return &ExportError{Retry: ctx.Err() == nil || st.Code() == codes.DeadlineExceeded, Err: fmt.Errorf("%s: %s", c, st.Message())}
		}
		return &ExportError{Err: fmt.Errorf("%s: %s: %s", c, st.Code(), st.Message())}
	}
	return partial(resp)
}

// partial turns a partial success into an error that is not retried:
// the server kept what it could.
func partial(resp *collpb.ExportProfilesServiceResponse) error {
	ps := resp.GetPartialSuccess()
	if ps == nil || (ps.GetRejectedProfiles() == 0 && ps.GetErrorMessage() == "") {
		return nil
	}
	return &ExportError{Err: fmt.Errorf("otlp: the endpoint rejected %d profile(s): %s", ps.GetRejectedProfiles(), ps.GetErrorMessage())}
}

type httpClient struct {
	cfg Config
	hc  *http.Client
}

func (c *httpClient) String() string { return "http " + c.cfg.Endpoint }
func (c *httpClient) Close() error   { c.hc.CloseIdleConnections(); return nil }

func (c *httpClient) Export(ctx context.Context, req *collpb.ExportProfilesServiceRequest) error {
	body, err := proto.Marshal(req)
	if err != nil {
		return &ExportError{Err: fmt.Errorf("otlp: encoding: %w", err)}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return &ExportError{Err: fmt.Errorf("otlp: %w", err)}
	}
	hreq.Header.Set("Content-Type", "application/x-protobuf")
	for k, v := range c.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return &ExportError{Retry: true, Err: fmt.Errorf("%s: %w", c, err)}
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return &ExportError{Retry: true, Err: fmt.Errorf("%s: reading the reply: %w", c, err)}
	}
	return parseHTTPReply(resp.StatusCode, resp.Header.Get("Retry-After"), reply)
}

// parseHTTPReply interprets an OTLP/HTTP reply: on 200 a protobuf
// ExportProfilesServiceResponse (a partial success is an error), else a
// google.rpc.Status (or any text) saying why. 429, 502, 503 and 504 are
// worth retrying, after Retry-After seconds if the server gave them.
func parseHTTPReply(code int, retryAfter string, body []byte) error {
	if code == http.StatusOK {
		resp := &collpb.ExportProfilesServiceResponse{}
		if err := proto.Unmarshal(body, resp); err != nil {
			return &ExportError{Err: fmt.Errorf("otlp: the endpoint's reply (%d bytes) is not an export response: %w", len(body), err)}
		}
		return partial(resp)
	}
	var msg string
	var st status.Status
	if proto.Unmarshal(body, &st) == nil && st.GetMessage() != "" {
		msg = ServerText(st.GetMessage(), 200)
	} else {
		msg = ServerText(string(body), 200)
	}
	e := &ExportError{Err: fmt.Errorf("otlp: HTTP %d: %s", code, msg)}
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.Retry = true
		if s, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && s > 0 && s < 3600 {
			e.After = time.Duration(s) * time.Second
		}
	}
	return e
}

// ServerText makes text a server sent fit for a terminal line: trimmed, at
// most max runes, quoted with control characters and invalid UTF-8
// escaped (a reply is untrusted: it must not move the cursor or recolour
// the user's terminal).
func ServerText(text string, max int) string {
	text = strings.TrimSpace(text)
	if utf8.RuneCountInString(text) > max {
		n := 0
		for i := range text {
			if n == max {
				return strconv.Quote(text[:i]) + "..."
			}
			n++
		}
	}
	return strconv.Quote(text)
}

// CheckEndpoint refuses an endpoint no upload could reach, at start-up
// rather than at the first upload: a URL must parse, with scheme http or
// https and a host; without a scheme it must be host:port.
func CheckEndpoint(endpoint string) error {
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		switch {
		case err != nil:
			return fmt.Errorf("endpoint %q: %v", endpoint, err)
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Errorf("endpoint %q: the scheme must be http or https", endpoint)
		case u.Hostname() == "":
			return fmt.Errorf("endpoint %q: no host", endpoint)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
				return fmt.Errorf("endpoint %q: bad port %q", endpoint, p)
			}
		}
		return nil
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" {
		return fmt.Errorf("endpoint %q: want host:port or an http(s) URL", endpoint)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("endpoint %q: bad port %q", endpoint, port)
	}
	return nil
}
