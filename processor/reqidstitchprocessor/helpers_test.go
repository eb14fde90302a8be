package reqidstitchprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

// t0 is the start of every test's clock.
var t0 = time.Date(2025, 5, 9, 12, 0, 0, 0, time.UTC)

// harness runs the logs and traces processors of one component ID on a fake
// clock with manual ticks, as the collector would: started, then shut down.
type harness struct {
	tb      testing.TB
	logs    processor.Logs
	traces  processor.Traces
	logOut  *consumertest.LogsSink
	spanOut *consumertest.TracesSink
	clock   time.Time
	ticks   chan chan struct{}
	metrics *sdkmetric.ManualReader
	// What the processors were made with, for another pipeline of theirs.
	factory processor.Factory
	cfg     *Config
	set     processor.Settings
	host    component.Host
}

func newHarness(tb testing.TB, configure func(*Config)) *harness {
	tb.Helper()
	return newHarnessOn(tb, componenttest.NewNopHost(), nil, configure)
}

// newHarnessOn runs the processors on host, whose extensions they may use,
// and sends what the logs processor passes on to nextLogs when it is set.
func newHarnessOn(tb testing.TB, host component.Host, nextLogs consumer.Logs, configure func(*Config)) *harness {
	tb.Helper()
	h := &harness{
		tb: tb, clock: t0, ticks: make(chan chan struct{}),
		logOut: new(consumertest.LogsSink), spanOut: new(consumertest.TracesSink),
		metrics: sdkmetric.NewManualReader(),
	}
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	if configure != nil {
		configure(cfg)
	}
	cfg.options = append(cfg.options, withClock(func() time.Time { return h.clock }), withTicks(h.ticks))
	set := processortest.NewNopSettings(metadata.Type)
	set.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.metrics))
	ctx := context.Background()
	var err error
	if nextLogs == nil {
		nextLogs = h.logOut
	}
	h.logs, err = f.CreateLogs(ctx, set, cfg, nextLogs)
	require.NoError(tb, err)
	h.traces, err = f.CreateTraces(ctx, set, cfg, h.spanOut)
	require.NoError(tb, err)
	h.factory, h.cfg, h.set, h.host = f, cfg, set, host
	require.NoError(tb, h.logs.Start(ctx, host))
	require.NoError(tb, h.traces.Start(ctx, host))
	tb.Cleanup(h.shutdown)
	return h
}

// addLogsPipeline starts a logs processor of the same component ID in
// another pipeline, which sends what it passes on to next.
func (h *harness) addLogsPipeline(next consumer.Logs) processor.Logs {
	h.tb.Helper()
	ctx := context.Background()
	logs, err := h.factory.CreateLogs(ctx, h.set, h.cfg, next)
	require.NoError(h.tb, err)
	require.NoError(h.tb, logs.Start(ctx, h.host))
	h.tb.Cleanup(func() { require.NoError(h.tb, logs.Shutdown(ctx)) })
	return logs
}

// shutdown is idempotent so that tests may shut down early to see the flush.
func (h *harness) shutdown() {
	if h.logs == nil {
		return
	}
	ctx := context.Background()
	require.NoError(h.tb, h.logs.Shutdown(ctx))
	require.NoError(h.tb, h.traces.Shutdown(ctx))
	h.logs, h.traces = nil, nil
}

func (h *harness) consumeLogs(ld plog.Logs) {
	h.tb.Helper()
	require.NoError(h.tb, h.logs.ConsumeLogs(context.Background(), ld))
}

func (h *harness) consumeTraces(td ptrace.Traces) {
	h.tb.Helper()
	require.NoError(h.tb, h.traces.ConsumeTraces(context.Background(), td))
}

// tick advances the clock by d and sweeps the holds, waiting until done.
func (h *harness) tick(d time.Duration) {
	h.clock = h.clock.Add(d)
	swept := make(chan struct{})
	h.ticks <- swept
	<-swept
}

func (h *harness) outLogs() []plog.LogRecord {
	var out []plog.LogRecord
	for _, ld := range h.logOut.AllLogs() {
		forEachLog(ld, func(_ plog.ResourceLogs, lr plog.LogRecord) { out = append(out, lr) })
	}
	return out
}

func (h *harness) outSpans() []ptrace.Span {
	var out []ptrace.Span
	for _, td := range h.spanOut.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, s ptrace.Span) { out = append(out, s) })
	}
	return out
}

// counter returns the sum of a telemetry counter over the points whose
// attributes include every given key=value pair.
func (h *harness) counter(name string, kv ...string) int64 {
	h.tb.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(h.tb, h.metrics.Collect(context.Background(), &rm))
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "otelcol_"+name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(h.tb, ok, "%s is not an int sum", name)
		points:
			for _, dp := range sum.DataPoints {
				for i := 0; i+1 < len(kv); i += 2 {
					if v, ok := dp.Attributes.Value(attribute.Key(kv[i])); !ok || v.AsString() != kv[i+1] {
						continue points
					}
				}
				total += dp.Value
			}
		}
	}
	return total
}

func forEachLog(ld plog.Logs, f func(plog.ResourceLogs, plog.LogRecord)) {
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		rl := ld.ResourceLogs().At(i)
		for j := 0; j < rl.ScopeLogs().Len(); j++ {
			lrs := rl.ScopeLogs().At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				f(rl, lrs.At(k))
			}
		}
	}
}

func forEachSpan(td ptrace.Traces, f func(ptrace.ResourceSpans, ptrace.Span)) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(rs, spans.At(k))
			}
		}
	}
}

// rec describes one test record: a log record when end is zero, else a span.
type rec struct {
	service, host string
	container     string // container.id of the resource
	pid           int64
	scope         string
	trace         pcommon.TraceID
	span, parent  pcommon.SpanID
	at, end       time.Time // a log's time, or a span's start and end
	name          string    // a span's name or a log's body
	attrs         map[string]any
}

func (r rec) resource(res pcommon.Resource) {
	a := res.Attributes()
	if r.service != "" {
		a.PutStr(string(semconv.ServiceNameKey), r.service)
	}
	if r.host != "" {
		a.PutStr(string(semconv.HostNameKey), r.host)
	}
	if r.pid != 0 {
		a.PutInt(string(semconv.ProcessPIDKey), r.pid)
	}
	if r.container != "" {
		a.PutStr(string(semconv.ContainerIDKey), r.container)
	}
}

func putAttrs(m pcommon.Map, attrs map[string]any) {
	for k, v := range attrs {
		switch v := v.(type) {
		case string:
			m.PutStr(k, v)
		case int:
			m.PutInt(k, int64(v))
		case int64:
			m.PutInt(k, v)
		case float64:
			m.PutDouble(k, v)
		case bool:
			m.PutBool(k, v)
		case []any:
			if err := m.PutEmptySlice(k).FromRaw(v); err != nil {
				panic(err)
			}
		default:
			panic("unsupported test attribute type")
		}
	}
}

// logsOf puts each record in a resource of its own.
func logsOf(recs ...rec) plog.Logs {
	ld := plog.NewLogs()
	for _, r := range recs {
		rl := ld.ResourceLogs().AppendEmpty()
		r.resource(rl.Resource())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(r.scope)
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(r.at))
		lr.Body().SetStr(r.name)
		lr.SetTraceID(r.trace)
		lr.SetSpanID(r.span)
		putAttrs(lr.Attributes(), r.attrs)
	}
	return ld
}

func tracesOf(recs ...rec) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range recs {
		rs := td.ResourceSpans().AppendEmpty()
		r.resource(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(r.scope)
		s := ss.Spans().AppendEmpty()
		s.SetName(r.name)
		s.SetTraceID(r.trace)
		s.SetSpanID(r.span)
		s.SetParentSpanID(r.parent)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(r.at))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(r.end))
		putAttrs(s.Attributes(), r.attrs)
	}
	return td
}

func str(m pcommon.Map, key string) string {
	v, ok := m.Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func reqIDAttr(id string) map[string]any { return map[string]any{golden.ReqID: id} }

func traceID(b byte) pcommon.TraceID { return pcommon.TraceID{b, b, b, 1} }
func spanID(b byte) pcommon.SpanID   { return pcommon.SpanID{b, b, 2} }
