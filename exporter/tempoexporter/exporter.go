package tempoexporter

import (
	"context"
	"errors"
	"maps"
	"slices"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/exporter/tempoexporter/internal/metadata"
	"github.com/loom-otel/loom/internal/tenant"
)

var errNotStarted = errors.New("tempo exporter not started")

type tempoExporter struct {
	cfg       *Config
	set       exporter.Settings
	telemetry *metadata.TelemetryBuilder
	// otlp is the core exporter factory each tenant client is made with.
	otlp    exporter.Factory
	host    component.Host
	clients *tenantClients
}

func newExporter(cfg *Config, set exporter.Settings) (*tempoExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &tempoExporter{cfg: cfg, set: set, telemetry: tb, otlp: otlpexporter.NewFactory()}
	if cfg.HTTP.HasValue() {
		e.otlp = otlphttpexporter.NewFactory()
	}
	return e, nil
}

// start keeps the host: tenant clients are created on demand and need its
// extensions (auth) to start.
func (e *tempoExporter) start(_ context.Context, host component.Host) error {
	e.host = host
	e.clients = newTenantClients(e.cfg.Tenant.MaxClients, e.newClient, e.set.Logger)
	e.clients.onOpen = func(delta int64) { e.telemetry.ExporterTempoTenantClients.Add(context.Background(), delta) }
	e.clients.onEvict = func() { e.telemetry.ExporterTempoTenantClientsEvicted.Add(context.Background(), 1) }
	return nil
}

func (e *tempoExporter) shutdown(ctx context.Context) error {
	var err error
	if e.clients != nil {
		err = e.clients.shutdown(ctx)
	}
	e.telemetry.Shutdown()
	return err
}

// newClient creates and starts a core OTLP exporter that sends with the
// tenant's X-Scope-OrgID. It has no queue, retry or timeout of its own: those
// of the tempo exporter apply around it.
func (e *tempoExporter) newClient(tenantID string) (exporter.Traces, error) {
	var cfg component.Config
	if e.cfg.HTTP.HasValue() {
		c := e.otlp.CreateDefaultConfig().(*otlphttpexporter.Config)
		c.ClientConfig = *e.cfg.HTTP.Get()
		c.ClientConfig.Headers = withTenant(c.ClientConfig.Headers, tenantID)
		c.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		c.RetryConfig.Enabled = false
		cfg = c
	} else {
		c := e.otlp.CreateDefaultConfig().(*otlpexporter.Config)
		c.ClientConfig = e.cfg.ClientConfig
		c.ClientConfig.Headers = withTenant(c.ClientConfig.Headers, tenantID)
		c.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		c.RetryConfig.Enabled = false
		c.TimeoutConfig.Timeout = 0
		cfg = c
	}
	set := e.set
	set.ID = component.NewIDWithName(e.otlp.Type(), e.set.ID.Name())
	set.Logger = e.set.Logger.With(zap.String("tenant", tenantID))
	// The tempo exporter reports sent and failed spans once, for all tenants.
	set.MeterProvider = metricnoop.NewMeterProvider()
	set.TracerProvider = tracenoop.NewTracerProvider()
	exp, err := e.otlp.CreateTraces(context.Background(), set, cfg)
	if err != nil {
		return nil, err
	}
	if err := exp.Start(context.Background(), e.host); err != nil {
		return nil, err
	}
	return exp, nil
}

// withTenant returns a copy of headers with X-Scope-OrgID set, unless tenantID is empty.
func withTenant(headers configopaque.MapList, tenantID string) configopaque.MapList {
	out := slices.Clone(headers)
	if tenantID != "" {
		out.Set(tenant.Header, configopaque.String(tenantID))
	}
	return out
}

// pushTraces promotes the golden fields onto spans, then sends each tenant's
// spans through its client, at most tenant::max_clients at once (more would
// evict clients still in use); when only some tenants fail retryably, only
// their spans are retried.
func (e *tempoExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	if e.clients == nil {
		return errNotStarted
	}
	if n := promoteGoldenFields(td); n > 0 {
		e.telemetry.ExporterTempoAttributesPromoted.Add(ctx, n)
	}
	byTenant, dropped := splitByTenant(ctx, td, &e.cfg.Tenant.Config)
	// Spans in a persistent queue from before a tenant::from_attribute change
	// (or tenant::from_metadata) change are only checked here; exporterhelper
	// counts them as sent too.
	e.countInvalidTenants(ctx, dropped)
	sends := tenant.Send(slices.Sorted(maps.Keys(byTenant)), e.cfg.Tenant.MaxClients, func(id string) error {
		return e.send(ctx, id, byTenant[id])
	})
	// The split moved spans out of td: a retry must carry the failed parts.
	return sends.Err(e.set.Logger, func(err error, failed map[string]bool) error {
		retry := ptrace.NewTraces()
		for id := range failed {
			byTenant[id].ResourceSpans().MoveAndAppendTo(retry.ResourceSpans())
		}
		return consumererror.NewTraces(err, retry)
	})
}

func (e *tempoExporter) send(ctx context.Context, tenantID string, td ptrace.Traces) error {
	client, err := e.clients.acquire(tenantID)
	if err != nil {
		// Creating a client only fails on its configuration: retrying cannot help.
		return consumererror.NewPermanent(err)
	}
	defer client.release()
	return client.exp.ConsumeTraces(ctx, td)
}
