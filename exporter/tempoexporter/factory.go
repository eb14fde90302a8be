package tempoexporter

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"

	"github.com/loom-otel/loom/exporter/tempoexporter/internal/metadata"
)

// NewFactory returns the factory of the tempo exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability))
}

// createDefaultConfig starts from the core OTLP exporters' defaults.
func createDefaultConfig() component.Config {
	grpc := otlpexporter.NewFactory().CreateDefaultConfig().(*otlpexporter.Config)
	http := otlphttpexporter.NewFactory().CreateDefaultConfig().(*otlphttpexporter.Config)
	return &Config{
		TimeoutConfig: grpc.TimeoutConfig,
		QueueConfig:   grpc.QueueConfig,
		RetryConfig:   grpc.RetryConfig,
		ClientConfig:  grpc.ClientConfig,
		HTTP:          configoptional.Default[confighttp.ClientConfig](http.ClientConfig),
		Tenant:        TenantConfig{MaxClients: 100},
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	e, err := newExporter(c, set)
	if err != nil {
		return nil, err
	}
	traces, err := exporterhelper.NewTraces(ctx, set, cfg, e.pushTraces,
		// Golden fields are written onto the spans.
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		exporterhelper.WithTimeout(c.TimeoutConfig),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
	)
	if err != nil {
		return nil, err
	}
	return &admittingTraces{Traces: traces, admit: e.dropInvalidTenants}, nil
}
