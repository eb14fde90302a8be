package tempoexporter

import (
	"context"

	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// dropInvalidTenant is the drop_reason of a span whose tenant header or attribute is not a valid tenant id.
const dropInvalidTenant = "invalid_tenant"

// admittingTraces drops the spans of invalid tenants before exporterhelper sees
// them: it counts every span of a push that returns nil in
// otelcol_exporter_sent_spans, so a span dropped on purpose must never reach a push.
type admittingTraces struct {
	exporter.Traces
	admit func(context.Context, ptrace.Traces)
}

func (a *admittingTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if a.admit(ctx, td); td.SpanCount() == 0 {
		return nil
	}
	return a.Traces.ConsumeTraces(ctx, td)
}

// dropInvalidTenants removes, in place (the exporter declares MutatesData), the
// spans whose tenant (header or attribute) is not a valid tenant id, and counts them.
func (e *tempoExporter) dropInvalidTenants(ctx context.Context, td ptrace.Traces) {
	if e.cfg.Tenant.FromMetadata == "" && e.cfg.Tenant.FromAttribute == "" {
		return
	}
	var dropped int64
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		if _, err := e.cfg.Tenant.Of(ctx, rs.Resource().Attributes()); err != nil {
			dropped += int64(spanCount(rs))
			return true
		}
		return false
	})
	e.countInvalidTenants(ctx, dropped)
}

func (e *tempoExporter) countInvalidTenants(ctx context.Context, dropped int64) {
	if dropped > 0 {
		e.telemetry.ExporterTempoSpansDropped.Add(ctx, dropped, metric.WithAttributes(attribute.String("drop_reason", dropInvalidTenant)))
	}
}
