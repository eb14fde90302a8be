package eventgraphexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadata"
	"github.com/loom-otel/loom/internal/sharedcomponent"
)

// NewFactory returns the factory of the eventgraph exporter.
func NewFactory() exporter.Factory {
	f := &factory{}
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(f.createLogs, metadata.LogsStability),
		exporter.WithTraces(f.createTraces, metadata.TracesStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		TimeoutConfig: exporterhelper.TimeoutConfig{Timeout: 30 * time.Second},
		QueueConfig:   configoptional.Some(exporterhelper.NewDefaultQueueConfig()),
		RetryConfig:   configretry.NewDefaultBackOffConfig(),
		Backend:       BackendEmbedded,
		Embedded: EmbeddedConfig{
			Path: "./data/loom-graph.db",
			Retention: RetentionConfig{
				MaxAge:        24 * time.Hour,
				MaxBytes:      1 << 30,
				CheckInterval: time.Minute,
			},
		},
		Neo4j: Neo4jConfig{
			Username: "neo4j",
			TLS:      configtls.NewDefaultClientConfig(),
			Batch:    BatchConfig{MaxRows: 1000, MaxWait: 100 * time.Millisecond},
		},
		MaxPropertyBytes: 4096,
	}
}

// factory shares one graphExporter (one store, one writer) between the logs
// and traces exporters of a component ID.
type factory struct {
	exporters sharedcomponent.Registry[*graphExporter]
}

func (f *factory) acquire(set exporter.Settings, cfg *Config) (*graphExporter, error) {
	return f.exporters.Acquire(set.ID, func() (*graphExporter, error) {
		e, err := newGraphExporter(cfg, set)
		if err == nil {
			e.release = func() bool { return f.exporters.Release(set.ID) }
		}
		return e, err
	})
}

func (f *factory) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	e, err := f.acquire(set, c)
	if err != nil {
		return nil, err
	}
	exp, err := exporterhelper.NewLogs(ctx, set, cfg, e.pushLogs, options(c, e)...)
	if err != nil && e.release() {
		e.telemetry.Shutdown()
	}
	return exp, err
}

func (f *factory) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	e, err := f.acquire(set, c)
	if err != nil {
		return nil, err
	}
	exp, err := exporterhelper.NewTraces(ctx, set, cfg, e.pushTraces, options(c, e)...)
	if err != nil && e.release() {
		e.telemetry.Shutdown()
	}
	return exp, err
}

func options(c *Config, e *graphExporter) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(c.TimeoutConfig),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
	}
}
