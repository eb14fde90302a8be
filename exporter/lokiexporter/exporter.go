package lokiexporter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loom-otel/loom/exporter/lokiexporter/internal/metadata"
	"github.com/loom-otel/loom/internal/tenant"
)

// maxResponseBytes bounds how much of a response body is read.
const maxResponseBytes = 64 << 10

type lokiExporter struct {
	cfg       *Config
	url       string
	userAgent string
	settings  component.TelemetrySettings
	telemetry *metadata.TelemetryBuilder
	conv      *converter
	encoders  sync.Pool
	client    *http.Client
	conns     *connTracker
	// maxBatchBytes is sending_queue::batch::max_size in bytes, 0 when batches are not sized in bytes.
	maxBatchBytes int
}

func newExporter(cfg *Config, set exporter.Settings) (*lokiExporter, error) {
	url, err := cfg.pushURL()
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &lokiExporter{
		cfg:           cfg,
		url:           url,
		userAgent:     fmt.Sprintf("%s/%s (%s/%s)", set.BuildInfo.Description, set.BuildInfo.Version, runtime.GOOS, runtime.GOARCH),
		settings:      set.TelemetrySettings,
		telemetry:     tb,
		conv:          newConverter(cfg),
		maxBatchBytes: maxBatchBytes(cfg),
	}
	e.encoders.New = func() any { return &encoder{encoding: cfg.Encoding} }
	return e, nil
}

// start builds the HTTP client here, where auth extensions are available.
func (e *lokiExporter) start(ctx context.Context, host component.Host) error {
	client, err := e.cfg.ClientConfig.ToClient(ctx, host.GetExtensions(), e.settings)
	if err != nil {
		return err
	}
	e.client = client
	e.conns = newConnTracker()
	return nil
}

func (e *lokiExporter) shutdown(context.Context) error {
	if e.conns != nil {
		e.conns.closeAll()
	}
	e.telemetry.Shutdown()
	return nil
}

// pushLogs sends one push per tenant, up to max_concurrent_pushes at once; when only some tenants fail retryably,
// only their records are retried.
func (e *lokiExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	if e.client == nil {
		return errNotStarted
	}
	byTenant, stats := e.conv.convert(ctx, ld, time.Now())
	e.record(ctx, stats)
	sends := tenant.Send(slices.Sorted(maps.Keys(byTenant)), e.cfg.MaxConcurrentPushes, func(id string) error {
		return e.send(ctx, id, byTenant[id].sorted())
	})
	return sends.Err(e.settings.Logger, func(err error, failed map[string]bool) error {
		if len(failed) == len(byTenant) {
			return err // retry the batch as it is
		}
		return consumererror.NewLogs(err, e.recordsOf(ctx, ld, failed))
	})
}

// recordsOf copies the records of the given tenants; ctx is the push's.
func (e *lokiExporter) recordsOf(ctx context.Context, ld plog.Logs, tenants map[string]bool) plog.Logs {
	out := plog.NewLogs()
	ld.CopyTo(out)
	out.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		id, err := e.conv.tenant.Of(ctx, rl.Resource().Attributes()) // a resource's records share its tenant
		return err != nil || !tenants[id]
	})
	return out
}

func (e *lokiExporter) send(ctx context.Context, tenantID string, streams []*stream) error {
	enc := e.encoders.Get().(*encoder)
	body, err := enc.encode(streams)
	e.encoders.Put(enc)
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("encode push: %w", err))
	}
	req, err := http.NewRequestWithContext(e.conns.trace(ctx), http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return consumererror.NewPermanent(err)
	}
	req.Header.Set("Content-Type", e.cfg.Encoding.contentType())
	req.Header.Set("User-Agent", e.userAgent)
	if tenantID != "" {
		req.Header.Set(tenant.Header, tenantID)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("push to loki: %w", err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	respBody, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	reasons, err := classify(resp.StatusCode, resp.Header, string(respBody), time.Now())
	for _, reason := range reasons {
		e.telemetry.ExporterLokiRequestsRejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
	return err
}

// record reports what a conversion dropped, cut or moved.
func (e *lokiExporter) record(ctx context.Context, s convertStats) {
	t := e.telemetry
	if s.truncated > 0 {
		t.ExporterLokiLinesTruncated.Add(ctx, s.truncated)
	}
	if s.tooLong > 0 {
		t.ExporterLokiRecordsDropped.Add(ctx, s.tooLong, metric.WithAttributes(attribute.String("drop_reason", dropLineTooLong)))
	}
	if s.invalidTenant > 0 {
		t.ExporterLokiRecordsDropped.Add(ctx, s.invalidTenant, metric.WithAttributes(attribute.String("drop_reason", dropInvalidTenant)))
	}
	if s.metadataDropped > 0 {
		t.ExporterLokiStructuredMetadataDropped.Add(ctx, s.metadataDropped)
	}
	for i, n := range s.overflows {
		if n > 0 {
			t.ExporterLokiLabelOverflows.Add(ctx, n, metric.WithAttributes(attribute.String("label", e.conv.rules[i].name)))
		}
	}
}
