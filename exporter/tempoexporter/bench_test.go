package tempoexporter

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

const benchSpans = 1000

// benchTraces is one batch of four services' spans; each resource carries a
// request's golden fields (to be promoted) and a tenant_id.
func benchTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	for s, service := range []string{"gateway", "preproc", "model", "postproc"} {
		rs := td.ResourceSpans().AppendEmpty()
		res := rs.Resource().Attributes()
		res.PutStr("service.name", service)
		res.PutStr("tenant_id", fmt.Sprintf("team-%d", s))
		res.PutStr(golden.ReqID, fmt.Sprintf("req-1715234890123-%06d", s))
		res.PutStr(golden.ModelVer, "llama3-8b-v2.1.4")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for i := range benchSpans / 4 {
			span := spans.AppendEmpty()
			span.SetName(service + "/step")
			span.SetTraceID(pcommon.TraceID{byte(s), byte(i), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
			span.SetSpanID(pcommon.SpanID{byte(s), byte(i), byte(i >> 8), 4, 5, 6, 7, 8})
			span.SetStartTimestamp(pcommon.Timestamp(1_715_234_890_123_000_000 + i))
			span.SetEndTimestamp(pcommon.Timestamp(1_715_234_890_133_000_000 + i))
			span.Attributes().PutStr(golden.Stage, service+"/run")
			span.Attributes().PutInt(golden.LatencyMs, int64(i%90))
		}
	}
	return td
}

// BenchmarkExport compares the tempo exporter with the core OTLP gRPC exporter,
// both sending the same batch to the collector's OTLP receiver in-process.
// The baseline sends the batch as it comes, with the golden fields on the
// resources only, so the ratio includes the larger payload after promotion.
func BenchmarkExport(b *testing.B) {
	benchExport(b, benchTraces())
}

// BenchmarkExportSamePayload gives the baseline the batch with the golden
// fields already on every span: both variants then send the same bytes, and the
// ratio is the cost of promotion and tenant routing alone.
func BenchmarkExportSamePayload(b *testing.B) {
	promoted := benchTraces()
	promoteGoldenFields(promoted)
	benchExport(b, promoted)
}

func benchExport(b *testing.B, baselineBatch ptrace.Traces) {
	addr := startReceiver(b, false, consumertest.NewNop())
	run := func(b *testing.B, exp exporter.Traces, batch ptrace.Traces) {
		require.NoError(b, exp.Start(context.Background(), componentHost{}))
		defer func() { require.NoError(b, exp.Shutdown(context.Background())) }()
		for b.Loop() {
			// A fresh copy each time: promotion writes to the batch.
			clone := ptrace.NewTraces()
			batch.CopyTo(clone)
			if err := exp.ConsumeTraces(context.Background(), clone); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchSpans*b.N)/b.Elapsed().Seconds(), "records/s")
	}

	b.Run("baseline-otlp", func(b *testing.B) {
		f := otlpexporter.NewFactory()
		cfg := f.CreateDefaultConfig().(*otlpexporter.Config)
		cfg.ClientConfig.Endpoint = addr
		cfg.ClientConfig.TLS.Insecure = true
		cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		cfg.RetryConfig.Enabled = false
		exp, err := f.CreateTraces(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
		require.NoError(b, err)
		run(b, exp, baselineBatch)
	})

	oneTenant := benchTraces()
	for _, rs := range oneTenant.ResourceSpans().All() {
		rs.Resource().Attributes().PutStr("tenant_id", "team-0")
	}
	for _, variant := range []struct {
		name  string
		batch ptrace.Traces
	}{{"tempo-1-tenant", oneTenant}, {"tempo-4-tenants", benchTraces()}} {
		b.Run(variant.name, func(b *testing.B) {
			exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(NewFactory().Type()), testConfig(addr, false))
			require.NoError(b, err)
			run(b, exp, variant.batch)
		})
	}
}

// componentHost is a host without extensions.
type componentHost struct{}

func (componentHost) GetExtensions() map[component.ID]component.Component { return nil }
