// A minimal OpenTelemetry Collector for the tracing tests (test/support/otlp-receiver.ts):
// the collector's own OTLP receiver in, each batch of spans out as one line of OTLP JSON
// appended to a file the test reads. Built from the collector's modules, all of one
// release (v0.165.0, with v1.71.0 of the stable ones: go.mod), by
// hack/build-otlp-receiver.sh; about 4 minutes cold on 2 cores, 37 MB. The exporter is
// synchronous (no queue): when the receiver answers a POST, its spans are in the file.
package main

import (
	"context"
	"errors"
	"os"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

type jsonLinesConfig struct {
	Path string `mapstructure:"path"`
}

func newJSONLinesFactory() exporter.Factory {
	return exporter.NewFactory(
		component.MustNewType("jsonlines"),
		func() component.Config { return &jsonLinesConfig{} },
		exporter.WithTraces(createTraces, component.StabilityLevelDevelopment),
	)
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*jsonLinesConfig)
	if c.Path == "" {
		return nil, errors.New("jsonlines: path is required")
	}
	f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	marshaler := &ptrace.JSONMarshaler{}
	push := func(_ context.Context, td ptrace.Traces) error {
		b, err := marshaler.MarshalTraces(td)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = f.Write(append(b, '\n'))
		return err
	}
	return exporterhelper.NewTraces(ctx, set, cfg, push,
		exporterhelper.WithShutdown(func(context.Context) error { return f.Close() }))
}

func main() {
	otlp := otlpreceiver.NewFactory()
	jsonl := newJSONLinesFactory()
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otlp-receiver", Description: "OTLP in, JSON lines out (tests)", Version: "v0.165.0"},
		Factories: func() (otelcol.Factories, error) {
			return otelcol.Factories{
				Receivers: map[component.Type]receiver.Factory{otlp.Type(): otlp},
				Exporters: map[component.Type]exporter.Factory{jsonl.Type(): jsonl},
				Telemetry: otelconftelemetry.NewFactory(),
			}, nil
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
				DefaultScheme:     "env",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		os.Exit(1)
	}
}
