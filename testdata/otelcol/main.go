// Command otelcol is the OpenTelemetry Collector that stacktop's fleet
// tests start: the core OTLP receiver (gRPC and HTTP) and the contrib file
// exporter, nothing else. It is its own module so that the Collector's
// dependencies stay out of stacktop's go.mod; export/otlp's tests build it
// once into a cache directory keyed by this module's go.sum.
//
// Run it with --feature-gates=service.profilesSupport and a config file,
// like any Collector build.
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	return otelcol.Factories{
		Receivers: map[component.Type]receiver.Factory{
			otlpreceiver.NewFactory().Type(): otlpreceiver.NewFactory(),
		},
		Exporters: map[component.Type]exporter.Factory{
			fileexporter.NewFactory().Type(): fileexporter.NewFactory(),
		},
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "stacktop test collector", Version: "test"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol:", err)
		os.Exit(1)
	}
}
