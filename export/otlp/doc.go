// Package otlp turns a profile.Profile into an OpenTelemetry profiles
// request (the OTLP profiles signal, v1development) and sends it to an
// OTLP endpoint over gRPC or HTTP/protobuf.
//
// # Which Go modules
//
// The profiles signal is still in development, and its Go messages live in
// the "slim" modules that the opentelemetry-proto-go project publishes for
// development signals: go.opentelemetry.io/proto/slim/otlp/profiles/v1development
// and .../collector/profiles/v1development (v0.4.x, proto v1.10-era
// messages: a dictionary shared by the request, stacks by index). The
// main go.opentelemetry.io/proto/otlp module's current releases (v1.11)
// carry no profiles package. These are the messages
// generated from the specification's .proto files, with no dependency but
// google.golang.org/protobuf. The alternative, the Collector's
// pdata/pprofile, is the Collector's in-memory model: a v0.x module that
// moves with every Collector release and brings Collector packages
// along. stacktop is a client that encodes one request per upload, so
// the generated messages are the smaller and steadier path; the tests
// check the wire format against a real Collector.
//
// The slim modules carry no gRPC service stubs, so the gRPC client calls
// the method by its full name (ProfilesService/Export) through
// google.golang.org/grpc.
//
// # Lifecycle
//
// Build reads an immutable profile (a snapshot, or a window of one made by
// package fleet) and returns a request; it keeps no state. A Client is made
// once per endpoint (NewClient), used by one uploader goroutine, and closed
// at the end. A failed Export returns an *ExportError whose Retryable says
// whether sending the request again may succeed.
//
// # Attributes
//
// Resource attributes follow the OpenTelemetry semantic conventions:
// host.name, process.pid, process.executable.path,
// process.executable.name, process.command, process.command_args,
// service.name, plus OTEL_RESOURCE_ATTRIBUTES. Samples carry thread.id
// and thread.name; each mapping carries process.executable.build_id.gnu,
// so a backend can symbolise later from a debuginfod server or a symbol
// store.
package otlp
