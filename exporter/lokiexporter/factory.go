package lokiexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/loom-otel/loom/exporter/lokiexporter/internal/metadata"
)

// NewFactory returns the factory of the loki exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	client := confighttp.NewDefaultClientConfig()
	client.Timeout = 30 * time.Second
	queue := exporterhelper.NewDefaultQueueConfig()
	// Loki prefers few large pushes; 4 MiB stays below its default 6 MB burst.
	queue.Batch = configoptional.Some(exporterhelper.BatchConfig{
		FlushTimeout: time.Second,
		Sizer:        exporterhelper.RequestSizerTypeBytes,
		MinSize:      1 << 20,
		MaxSize:      4 << 20,
	})
	return &Config{
		ClientConfig: client,
		QueueConfig:  configoptional.Some(queue),
		RetryConfig:  configretry.NewDefaultBackOffConfig(),
		Encoding:     EncodingProtobuf,
		Labels:       LabelsConfig{MaxValuesPerLabel: 100, CardinalityWindow: time.Hour},
		Line:         LineConfig{Format: LineFormatJSON, MaxSize: 256 << 10, OnTooLong: OnTooLongTruncate},
		// With sending_queue::num_consumers (10) batches in flight, at most 40 pushes.
		MaxConcurrentPushes: 4,
	}
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	e, err := newExporter(c, set)
	if err != nil {
		return nil, err
	}
	logs, err := exporterhelper.NewLogs(ctx, set, cfg, e.pushLogs,
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// The HTTP client's timeout bounds each push, as in the otlphttp exporter.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
	)
	if err != nil {
		return nil, err
	}
	return &admittingLogs{Logs: logs, admit: e.admit}, nil
}
