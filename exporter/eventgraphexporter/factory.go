package eventgraphexporter

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadata"
)

// NewFactory returns the factory of the eventgraph exporter.
func NewFactory() exporter.Factory {
	f := &factory{shared: map[component.ID]*graphExporter{}}
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
	mu     sync.Mutex
	shared map[component.ID]*graphExporter
}

func (f *factory) acquire(set exporter.Settings, cfg *Config) (*graphExporter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.shared[set.ID]
	if !ok {
		var err error
		if e, err = newGraphExporter(cfg, set); err != nil {
			return nil, err
		}
		e.release = func() bool { return f.release(set.ID, e) }
		f.shared[set.ID] = e
	}
	e.refs++
	return e, nil
}

func (f *factory) release(id component.ID, e *graphExporter) (last bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.refs--
	if e.refs > 0 {
		return false
	}
	delete(f.shared, id)
	return true
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
