package reqsamplingprocessor

import (
	"cmp"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
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

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
)

var t0 = time.Unix(1715234890, 0)

// harnesses numbers the harnesses: each runs under its own component ID.
var harnesses atomic.Int64

func defaultConfig() *Config { return createDefaultConfig().(*Config) }

// clock is a settable time, read by the deciding goroutine.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness runs the logs and traces processors of one component ID, as a
// collector with a logs and a traces pipeline does, on a test clock and ticks.
type harness struct {
	t         testing.TB
	clock     *clock
	ticks     chan chan struct{}
	logs      processor.Logs
	traces    processor.Traces
	logSink   *consumertest.LogsSink
	traceSink *consumertest.TracesSink
	tel       *componenttest.Telemetry
	id        component.ID
	stopped   bool
}

func newHarness(t testing.TB, cfg *Config) *harness {
	t.Helper()
	logSink, traceSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	h := newHarnessWith(t, cfg, logSink, traceSink)
	h.logSink, h.traceSink = logSink, traceSink
	return h
}

// newHarnessTo sends what the processors keep to next.
func newHarnessTo(t testing.TB, cfg *Config, next interface {
	consumer.Logs
	consumer.Traces
}) *harness {
	return newHarnessWith(t, cfg, next, next)
}

func newHarnessWith(t testing.TB, cfg *Config, nextLogs consumer.Logs, nextTraces consumer.Traces) *harness {
	t.Helper()
	id := component.MustNewIDWithName(metadata.Type.String(), strconv.Itoa(int(harnesses.Add(1))))
	return newHarnessOn(t, cfg, componenttest.NewNopHost(), id, nextLogs, nextTraces)
}

// newHarnessOn runs the processors of id on host, whose extensions they may use.
func newHarnessOn(t testing.TB, cfg *Config, host component.Host, id component.ID, nextLogs consumer.Logs, nextTraces consumer.Traces) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		clock: &clock{now: t0},
		ticks: make(chan chan struct{}),
		tel:   componenttest.NewTelemetry(),
	}
	cfg.options = append(cfg.options, withClock(h.clock.Now), withTicks(h.ticks))
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	set.ID = id
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	h.id = set.ID
	var err error
	h.logs, err = f.CreateLogs(context.Background(), set, cfg, nextLogs)
	require.NoError(t, err)
	h.traces, err = f.CreateTraces(context.Background(), set, cfg, nextTraces)
	require.NoError(t, err)
	require.NoError(t, h.logs.Start(context.Background(), host))
	require.NoError(t, h.traces.Start(context.Background(), host))
	t.Cleanup(func() {
		h.shutdown()
		require.NoError(t, h.tel.Shutdown(context.Background()))
	})
	return h
}

func (h *harness) send(td ptrace.Traces, ld plog.Logs) {
	h.t.Helper()
	if td.SpanCount() > 0 {
		require.NoError(h.t, h.traces.ConsumeTraces(context.Background(), td))
	}
	if ld.LogRecordCount() > 0 {
		require.NoError(h.t, h.logs.ConsumeLogs(context.Background(), ld))
	}
}

// tick runs one tick after everything sent so far has been taken in.
func (h *harness) tick() {
	ack := make(chan struct{})
	h.ticks <- ack
	<-ack
}

// wait advances the clock by d and ticks.
func (h *harness) wait(d time.Duration) {
	h.clock.advance(d)
	h.tick()
}

// sampler is the state the harness's processors share.
func (h *harness) sampler() *sampler {
	m, ok := LookupFailureMap(h.id)
	require.True(h.t, ok)
	return m.(*sampler)
}

// heatMap is the processor's failure map, as an extension reads it.
func (h *harness) heatMap() HeatMap {
	m, ok := LookupFailureMap(h.id)
	require.True(h.t, ok)
	return m.HeatMap()
}

func (h *harness) shutdown() {
	if h.stopped {
		return
	}
	h.stopped = true
	require.NoError(h.t, h.traces.Shutdown(context.Background()))
	require.NoError(h.t, h.logs.Shutdown(context.Background()))
}

// out is what came out of a harness: every record, by req_id.
type out struct {
	logs, spans map[string][]pcommon.Map
}

func (h *harness) out() out {
	o := out{logs: map[string][]pcommon.Map{}, spans: map[string][]pcommon.Map{}}
	for _, ld := range h.logSink.AllLogs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			o.logs[reqIDOf(lr.Attributes())] = append(o.logs[reqIDOf(lr.Attributes())], lr.Attributes())
		})
	}
	for _, td := range h.traceSink.AllTraces() {
		forEachSpan(td, func(s ptrace.Span) {
			o.spans[reqIDOf(s.Attributes())] = append(o.spans[reqIDOf(s.Attributes())], s.Attributes())
		})
	}
	return o
}

func (o out) records(reqID string) int { return len(o.logs[reqID]) + len(o.spans[reqID]) }

func reqIDOf(attrs pcommon.Map) string {
	if v, ok := attrs.Get(golden.ReqID); ok {
		return v.AsString()
	}
	return ""
}

func forEachLog(ld plog.Logs, f func(plog.LogRecord)) {
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
				f(sls.At(j).LogRecords().At(k))
			}
		}
	}
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				f(sss.At(j).Spans().At(k))
			}
		}
	}
}

// rec describes one test record; zero fields are left unset.
type rec struct {
	reqID     string
	traceID   byte // the trace id is 16 times this byte; 0: none
	stage     string
	inputHash string
	attrs     map[string]any
	// logs only
	severity plog.SeverityNumber
	body     string // "a log line" when empty
	// spans only
	service    string
	root       bool
	start, end time.Duration // after t0
	statusErr  bool
}

func (r rec) putCommon(attrs pcommon.Map) {
	if r.attrs != nil {
		_ = attrs.FromRaw(r.attrs)
	}
	if r.reqID != "" {
		attrs.PutStr(golden.ReqID, r.reqID)
	}
	if r.stage != "" {
		attrs.PutStr(golden.Stage, r.stage)
	}
	if r.inputHash != "" {
		attrs.PutStr(golden.InputHash, r.inputHash)
	}
}

func traceIDOf(b byte) pcommon.TraceID {
	var id pcommon.TraceID
	if b != 0 {
		for i := range id {
			id[i] = b
		}
	}
	return id
}

func logsOf(recs ...rec) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		lr := lrs.AppendEmpty()
		r.putCommon(lr.Attributes())
		lr.SetTraceID(traceIDOf(r.traceID))
		lr.SetSeverityNumber(r.severity)
		lr.Body().SetStr(cmp.Or(r.body, "a log line"))
	}
	return ld
}

func tracesOf(recs ...rec) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range recs {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", r.service)
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetName("span")
		r.putCommon(s.Attributes())
		s.SetTraceID(traceIDOf(max(r.traceID, 1)))
		s.SetSpanID(pcommon.SpanID{1})
		if !r.root {
			s.SetParentSpanID(pcommon.SpanID{2})
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(r.start)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(r.end)))
		if r.statusErr {
			s.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	return td
}

// onlyPolicies returns the default config with just these policies and no base rate.
func onlyPolicies(policies ...PolicyConfig) *Config {
	cfg := defaultConfig()
	cfg.BasePercentage = 0
	cfg.Policies = policies
	return cfg
}
