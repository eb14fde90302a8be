package goldenfieldprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
)

// rec describes one log record or span for a test.
type rec struct {
	service string
	body    any // string or map[string]any; logs only
	attrs   map[string]any
	// mutate, when set, adjusts the record after the fields above are set.
	mutateLog func(plog.LogRecord)
}

func defaultConfig() *Config { return createDefaultConfig().(*Config) }

// strictConfig requires every required field of every record, whatever its
// service has carried before: what a test of the contract on a few
// records means.
func strictConfig() *Config {
	cfg := defaultConfig()
	cfg.Validation.PerService = false
	return cfg
}

func makeLogs(t testing.TB, recs ...rec) plog.Logs {
	ld := plog.NewLogs()
	for _, r := range recs {
		rl := ld.ResourceLogs().AppendEmpty()
		if r.service != "" {
			rl.Resource().Attributes().PutStr("service.name", r.service)
		}
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		require.NoError(t, lr.Attributes().FromRaw(r.attrs))
		switch b := r.body.(type) {
		case string:
			lr.Body().SetStr(b)
		case map[string]any:
			require.NoError(t, lr.Body().SetEmptyMap().FromRaw(b))
		}
		if r.mutateLog != nil {
			r.mutateLog(lr)
		}
	}
	return ld
}

func makeTraces(t testing.TB, recs ...rec) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range recs {
		rs := td.ResourceSpans().AppendEmpty()
		if r.service != "" {
			rs.Resource().Attributes().PutStr("service.name", r.service)
		}
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.SetName("span")
		require.NoError(t, span.Attributes().FromRaw(r.attrs))
	}
	return td
}

func settings(tel *componenttest.Telemetry) processor.Settings {
	if tel == nil {
		return processortest.NewNopSettings(metadata.Type)
	}
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	return set
}

// runLogs sends ld through a fresh logs processor built from cfg and returns
// the log records that came out, in order.
func runLogs(t testing.TB, cfg *Config, ld plog.Logs) []plog.LogRecord {
	t.Helper()
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	require.NoError(t, p.Shutdown(context.Background()))
	return logRecords(sink.AllLogs())
}

func logRecords(all []plog.Logs) []plog.LogRecord {
	var out []plog.LogRecord
	for _, ld := range all {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
					out = append(out, sls.At(j).LogRecords().At(k))
				}
			}
		}
	}
	return out
}

// runOne processes a single log record with cfg and returns its attributes.
func runOne(t testing.TB, cfg *Config, r rec) (pcommon.Map, plog.LogRecord) {
	t.Helper()
	out := runLogs(t, cfg, makeLogs(t, r))
	require.Len(t, out, 1)
	return out[0].Attributes(), out[0]
}

// strList returns the string elements of a slice attribute (nil when absent).
func strList(attrs pcommon.Map, key string) []string {
	v, ok := attrs.Get(key)
	if !ok {
		return nil
	}
	var out []string
	for i := 0; i < v.Slice().Len(); i++ {
		out = append(out, v.Slice().At(i).Str())
	}
	return out
}

func makeMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("gpu.utilization")
	m.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.9)
	return md
}
