package reqsamplingprocessor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadatatest"
)

// requests returns n requests with two spans (an entry span and a child)
// and one log each; mutate shapes each request's child span and log.
func requests(n int, mutate func(i int, r *rec)) (ptrace.Traces, plog.Logs) {
	var spans, logs []rec
	for i := range n {
		base := rec{reqID: id(i), traceID: byte(i%250 + 1), stage: "model/forward"}
		if mutate != nil {
			mutate(i, &base)
		}
		root := base
		root.root, root.service, root.stage, root.end = true, "gateway", "gateway/request", max(base.end, 100*time.Millisecond)
		base.end = 50 * time.Millisecond
		spans = append(spans, root, base)
		logs = append(logs, base)
	}
	return tracesOf(spans...), logsOf(logs...)
}

func TestWaitsForDecisionWaitThenKeepsWholeRequests(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 50
	h := newHarness(t, cfg)
	h.send(requests(100, nil))
	h.wait(cfg.DecisionWait - time.Second)
	assert.Zero(t, h.logSink.LogRecordCount()+h.traceSink.SpanCount(), "nothing leaves before decision_wait")
	h.wait(time.Second)

	o := h.out()
	kept := 0
	for i := range 100 {
		id := id(i)
		switch o.records(id) {
		case 0:
		case 3:
			kept++
			assert.Len(t, o.logs[id], 1)
			assert.Len(t, o.spans[id], 2)
		default:
			t.Errorf("%s: %d of its records kept: all or none", id, o.records(id))
		}
	}
	assert.InDelta(t, 50, kept, 15, "base rate 50%%")
}

func TestSameDecisionOnEveryInstanceAndSignal(t *testing.T) {
	cfg := func() *Config {
		c := defaultConfig()
		c.BasePercentage = 30
		return c
	}
	// Two collector instances: one gets the spans, the other the logs.
	a, b := newHarness(t, cfg()), newHarness(t, cfg())
	td, ld := requests(200, func(_ int, r *rec) { r.traceID = 0 })
	a.send(td, plog.NewLogs())
	b.send(ptrace.NewTraces(), ld)
	a.wait(time.Minute)
	b.wait(time.Minute)
	spansKept, logsKept := a.out().spans, b.out().logs
	assert.NotEmpty(t, spansKept)
	assert.Len(t, logsKept, len(spansKept))
	for id := range spansKept {
		assert.Contains(t, logsKept, id)
	}

	// Another seed draws other requests.
	c := cfg()
	c.HashSeed = 7
	other := newHarness(t, c)
	other.send(requests(200, func(_ int, r *rec) { r.traceID = 0 }))
	other.wait(time.Minute)
	assert.NotEqual(t, keys(spansKept), keys(other.out().spans))
}

func TestAnnotation(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 100
	h := newHarness(t, cfg)
	td, ld := requests(2, func(i int, r *rec) {
		if i == 1 {
			r.severity = plog.SeverityNumberError
		}
	})
	h.send(td, ld)
	h.wait(time.Minute)
	o := h.out()
	for id, policy := range map[string]string{"req-1715234890000-abcdef": basePolicy, "req-1715234890001-abcdef": "errors"} {
		for _, attrs := range append(o.logs[id], o.spans[id]...) {
			got, _ := attrs.Get(golden.SamplingPolicy)
			assert.Equal(t, policy, got.Str())
			count, _ := attrs.Get(golden.SamplingAdjustedCount)
			assert.InDelta(t, 1.0, count.Double(), 1e-12)
		}
	}

	cfg = defaultConfig()
	cfg.BasePercentage = 1
	h = newHarness(t, cfg)
	td, ld = requests(1000, nil)
	h.send(td, ld)
	h.wait(time.Minute)
	o = h.out()
	require.NotEmpty(t, o.spans)
	for _, spans := range o.spans {
		count, _ := spans[0].Get(golden.SamplingAdjustedCount)
		assert.InDelta(t, 100.0, count.Double(), 1e-9, "kept at 1%%: stands for 100 requests")
	}
	assert.InDelta(t, 10, len(o.spans), 8, "about 1% of 1000")
}

// keptIDs decides requests built by mutate under cfg and returns the kept req_ids.
func keptIDs(t *testing.T, cfg *Config, n int, mutate func(i int, r *rec)) map[string]string {
	h := newHarness(t, cfg)
	h.send(requests(n, mutate))
	h.wait(time.Minute)
	kept := map[string]string{}
	for id, spans := range h.out().spans {
		p, _ := spans[0].Get(golden.SamplingPolicy)
		kept[id] = p.Str()
	}
	return kept
}

func id(i int) string { return fmt.Sprintf("req-%013d-abcdef", 1715234890000+i) }

func TestPoliciesThroughTheProcessor(t *testing.T) {
	defaults := defaultConfig().Policies
	errorsPolicy, latency, hot := defaults[0], defaults[1], defaults[3]
	emptyOutput := PolicyConfig{Name: "empty_output", Type: FailureCondition, FailureCondition: FailureConditionConfig{Conditions: []string{
		`Int(attributes["output_length"]) == 0`,
		`attributes["filter_reason"] != nil and attributes["filter_reason"] != "none"`,
	}}}
	cacheMiss := PolicyConfig{Name: "cache_miss", Type: Stage, Stage: StageConfig{Patterns: []string{"cache/miss*"}}}
	ranges := PolicyConfig{Name: "known_bad_inputs", Type: InputHash, InputHash: InputHashConfig{Ranges: []string{"00-09"}}}
	invalid := PolicyConfig{Name: "invalid", Type: GoldenInvalid}
	threshold := latency
	threshold.Latency.Threshold = 2 * time.Second

	for name, tc := range map[string]struct {
		policy PolicyConfig
		mutate func(r *rec)
	}{
		"errors: log severity": {errorsPolicy, func(r *rec) { r.severity = plog.SeverityNumberError }},
		"errors: span status":  {errorsPolicy, func(r *rec) { r.statusErr = true }},
		"errors: attribute":    {errorsPolicy, func(r *rec) { r.attrs = map[string]any{"error_code": "E42"} }},
		"errors: body text":    {errorsPolicy, func(r *rec) { r.body = "ERROR write to shard failed" }},
		"empty output":         {emptyOutput, func(r *rec) { r.attrs = map[string]any{"output_length": "0"} }},
		"filtered output":      {emptyOutput, func(r *rec) { r.attrs = map[string]any{"filter_reason": "empty_after_dedup"} }},
		"latency threshold":    {threshold, func(r *rec) { r.end = 3 * time.Second }},
		"stage":                {cacheMiss, func(r *rec) { r.stage = "cache/miss/cold" }},
		"input_hash range":     {ranges, func(r *rec) { r.inputHash = "05a1b2c3" }},
		"golden invalid":       {invalid, func(r *rec) { r.attrs = map[string]any{golden.ValidAttr: false} }},
	} {
		t.Run(name, func(t *testing.T) {
			kept := keptIDs(t, onlyPolicies(tc.policy, hot), 10, func(i int, r *rec) {
				r.inputHash = fmt.Sprintf("%08x", 0xa0000000+i)
				if i == 3 {
					tc.mutate(r)
				}
			})
			assert.Equal(t, map[string]string{id(3): tc.policy.Name}, kept)
		})
	}
}

// A stage is slow against its own place (service, stage, model), learned
// online; a place without a baseline yet is never slow.
func TestLatencyPerPlace(t *testing.T) {
	policy := defaultConfig().Policies[1]
	policy.Latency.MinSamples = 50
	cfg := onlyPolicies(policy)
	cfg.DecisionWait = time.Second
	h := newHarness(t, cfg)
	for i := range 300 {
		d := time.Duration(100+i%50) * time.Millisecond
		if i == 250 {
			d = 900 * time.Millisecond
		}
		spans := []rec{{reqID: id(i), root: true, service: "gateway", stage: "gateway/request", end: d}}
		if i == 270 { // the first span of its place has no baseline yet
			spans = append(spans, rec{reqID: id(i), stage: "engine/load", end: 5 * time.Second})
		}
		if i == 280 { // nor is a request slow against another place's records
			spans[0].service = "celery-worker"
		}
		h.send(tracesOf(spans...), plog.NewLogs())
		h.wait(time.Second) // one request per decision, so the sketch sees them in order
	}
	assert.Equal(t, []string{id(250)}, keys(h.out().spans))
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLearnsHotInputsAndKeepsTheirSilentFailures(t *testing.T) {
	defaults := defaultConfig().Policies
	h := newHarness(t, onlyPolicies(defaults[0], defaults[3]))
	// Requests on input 0b000001 fail with an error three times...
	for i := range 3 {
		h.send(requests(1, func(_ int, r *rec) {
			r.reqID, r.inputHash, r.severity = id(i), "0b000001", plog.SeverityNumberError
		}))
		h.wait(time.Minute)
	}
	// ...then one fails silently on the same input, and one on a new input
	// of the same bucket; a request on another input is not kept.
	h.send(requests(3, func(i int, r *rec) {
		r.reqID, r.inputHash = id(10+i), []string{"0b000001", "0b777777", "1c000000"}[i]
	}))
	h.wait(time.Minute)
	o := h.out()
	for _, want := range []string{id(0), id(1), id(2), id(10), id(11)} {
		assert.Equal(t, 3, o.records(want), want)
	}
	assert.Zero(t, o.records(id(12)))
	for _, attrs := range o.spans[id(10)] {
		p, _ := attrs.Get(golden.SamplingPolicy)
		assert.Equal(t, "hot_input", p.Str())
	}

	m, ok := LookupFailureMap(h.id)
	require.True(t, ok)
	heat := m.HeatMap()
	require.Len(t, heat.HotInputs, 1)
	assert.Equal(t, "0b000001", heat.HotInputs[0].InputHash)
	assert.InDelta(t, 0.75, heat.HotInputs[0].FailureRate, 0.01, "3 of 4, the older ones decayed a little")
	byPrefix := map[string]BucketHeat{}
	for _, b := range heat.Buckets {
		byPrefix[b.Prefix] = b
	}
	b := byPrefix["0b"]
	assert.Equal(t, BucketHeat{Prefix: "0b", Requests: 5, Failures: 3, Kept: 5, Hot: true},
		BucketHeat{Prefix: b.Prefix, Requests: b.Requests, Failures: b.Failures, Kept: b.Kept, Hot: b.Hot})
	assert.InDelta(t, 5, b.RecentRequests, 0.2, "learned on arrival, decayed since")
	assert.InDelta(t, 3, b.RecentFailures, 0.2)
	assert.Equal(t, int64(1), byPrefix["1c"].Requests)
	assert.Equal(t, DecisionCount{Kept: 3}, heat.Decisions["errors"])
	assert.Equal(t, DecisionCount{Kept: 2}, heat.Decisions["hot_input"])
	assert.Equal(t, DecisionCount{Dropped: 1}, heat.Decisions[basePolicy])
}

func TestOverflowDecidesTheOldestEarly(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 100
	cfg.MaxRequests = 3
	cfg.NumShards = 1 // the limits of one shard, over one order of arrival
	h := newHarness(t, cfg)
	for i := range 5 {
		h.send(requests(1, func(_ int, r *rec) { r.reqID, r.traceID = id(i), 0 }))
	}
	h.tick()
	o := h.out()
	assert.Equal(t, 3, o.records(id(0)), "decided early, with all it had")
	assert.Equal(t, 3, o.records(id(1)))
	assert.Zero(t, o.records(id(2)), "still waiting")
	metadatatest.AssertEqualProcessorReqsamplingEarlyDecisions(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "max_requests"))},
	}, metricdatatest.IgnoreTimestamp())

	cfg = defaultConfig()
	cfg.BasePercentage = 100
	cfg.MaxBytes = 1500
	cfg.NumShards = 1
	h = newHarness(t, cfg)
	for i := range 10 {
		h.send(tracesOf(rec{reqID: id(i), attrs: map[string]any{"payload": strings.Repeat("x", 400)}}), plog.NewLogs())
	}
	h.tick()
	pendingBytes, pendingRequests := gauge(t, h, "pending_bytes"), gauge(t, h, "pending_requests")
	assert.LessOrEqual(t, pendingBytes, int64(cfg.MaxBytes))
	assert.Positive(t, pendingRequests)
	assert.Len(t, h.out().spans, 10-int(pendingRequests), "the others were decided early")
	metadatatest.AssertEqualProcessorReqsamplingEarlyDecisions(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 10 - pendingRequests, Attributes: attribute.NewSet(attribute.String("reason", "max_bytes"))},
	}, metricdatatest.IgnoreTimestamp())
}

// gauge reads one of the processor's int gauges.
func gauge(t *testing.T, h *harness, name string) int64 {
	m, err := h.tel.GetMetric("otelcol_processor_reqsampling_" + name)
	require.NoError(t, err)
	return m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value
}

func TestLateRecordsShareTheDecision(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 0
	cfg.DecisionCache.TTL = time.Minute
	h := newHarness(t, cfg)
	h.send(requests(2, func(i int, r *rec) {
		r.traceID = 0
		if i == 0 {
			r.statusErr = true
		}
	}))
	h.wait(cfg.DecisionWait)
	require.Equal(t, 3, h.out().records(id(0)))
	// Both requests' workers log late: the kept one's line is kept at once,
	// the dropped one's dropped.
	h.send(ptrace.NewTraces(), logsOf(rec{reqID: id(0)}, rec{reqID: id(1)}))
	h.tick()
	o := h.out()
	assert.Equal(t, 4, o.records(id(0)))
	assert.Zero(t, o.records(id(1)))
	metadatatest.AssertEqualProcessorReqsamplingLateRecords(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("signal", "logs"), attribute.String("outcome", "kept"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("signal", "logs"), attribute.String("outcome", "dropped"))},
	}, metricdatatest.IgnoreTimestamp())

	// Once the decision is forgotten, a record starts a new request.
	h.wait(time.Minute)
	h.send(ptrace.NewTraces(), logsOf(rec{reqID: id(0)}))
	h.tick()
	assert.Equal(t, 4, h.out().records(id(0)), "waits for a new decision")
	h.wait(cfg.DecisionWait)
	assert.Equal(t, 4, h.out().records(id(0)), "decided anew: no error among its records now")
}

// A dropped request whose late records show a failure was decided too soon
// (decision_wait shorter than its records' delay): the failing records and
// those after them are kept, and it is counted so that the SRE raises
// decision_wait.
func TestLateFailureKeepsTheRestOfADroppedRequest(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 0
	cfg.DecisionCache.TTL = time.Minute
	h := newHarness(t, cfg)
	h.send(requests(2, func(_ int, r *rec) { r.traceID = 0 }))
	h.wait(cfg.DecisionWait)
	require.Zero(t, h.out().records(id(0)))

	h.send(ptrace.NewTraces(), logsOf(rec{reqID: id(0), severity: plog.SeverityNumberError}, rec{reqID: id(1)}))
	h.tick()
	h.send(ptrace.NewTraces(), logsOf(rec{reqID: id(0)}))
	h.tick()
	o := h.out()
	assert.Equal(t, 2, o.records(id(0)), "the failing late record and the one after it")
	assert.Zero(t, o.records(id(1)), "a healthy late record keeps the drop")
	metadatatest.AssertEqualProcessorReqsamplingLateFailures(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestDecisionCacheIsBounded(t *testing.T) {
	cfg := defaultConfig()
	cfg.DecisionCache.MaxEntries = 10
	cfg.NumShards = 1 // the bound of one shard
	h := newHarness(t, cfg)
	h.send(requests(25, nil))
	h.wait(cfg.DecisionWait)
	metadatatest.AssertEqualProcessorReqsamplingEvictions(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 15, Attributes: attribute.NewSet(attribute.String("state", "decision_cache"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestShutdownDecidesAndFlushesEverything(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 0
	h := newHarness(t, cfg)
	h.send(requests(3, func(i int, r *rec) {
		if i == 1 {
			r.severity = plog.SeverityNumberFatal
		}
	}))
	assert.Zero(t, h.logSink.LogRecordCount()+h.traceSink.SpanCount())
	h.shutdown()
	o := h.out()
	assert.Equal(t, 3, o.records(id(1)), "both signals flushed")
	assert.Len(t, o.logs[id(1)], 1)
	assert.Zero(t, o.records(id(0))+o.records(id(2)))
	metadatatest.AssertEqualProcessorReqsamplingEarlyDecisions(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 3, Attributes: attribute.NewSet(attribute.String("reason", "shutdown"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorReqsamplingRecords(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("signal", "traces"), attribute.String("outcome", "kept"))},
		{Value: 4, Attributes: attribute.NewSet(attribute.String("signal", "traces"), attribute.String("outcome", "dropped"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("signal", "logs"), attribute.String("outcome", "kept"))},
		{Value: 2, Attributes: attribute.NewSet(attribute.String("signal", "logs"), attribute.String("outcome", "dropped"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestFirstShutdownFlushesAndTheOtherSignalGoesOn(t *testing.T) {
	h := newHarness(t, onlyPolicies(defaultConfig().Policies[0]))
	h.send(requests(1, func(_ int, r *rec) { r.statusErr = true }))
	require.NoError(t, h.traces.Shutdown(context.Background()))
	assert.Equal(t, 3, h.out().records(id(0)), "decided and flushed by the first shutdown")
	// The logs pipeline still delivers: its late record follows the decision.
	require.NoError(t, h.logs.ConsumeLogs(context.Background(), logsOf(rec{reqID: id(0)})))
	require.NoError(t, h.logs.Shutdown(context.Background()))
	h.stopped = true
	assert.Equal(t, 4, h.out().records(id(0)))
	assert.ErrorIs(t, h.logs.ConsumeLogs(context.Background(), logsOf(rec{reqID: id(1)})), errShutdown)
}

func TestRecordsWithoutKeyAreDecidedAlone(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 10
	h := newHarness(t, cfg)
	var noise []rec
	for range 1000 {
		noise = append(noise, rec{})
	}
	noise = append(noise, rec{severity: plog.SeverityNumberError})
	h.send(ptrace.NewTraces(), logsOf(noise...))
	h.tick()
	kept := h.logSink.LogRecordCount()
	assert.InDelta(t, 101, kept, 35, "10% of the noise, and the error line")
	var errorsKept int
	for _, ld := range h.logSink.AllLogs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			if lr.SeverityNumber() == plog.SeverityNumberError {
				errorsKept++
			}
		})
	}
	assert.Equal(t, 1, errorsKept)
}

func TestBadInputNeverPanics(t *testing.T) {
	h := newHarness(t, defaultConfig())
	ld := logsOf(
		rec{attrs: map[string]any{golden.ReqID: 42}},                             // not a string: no key
		rec{reqID: strings.Repeat("r", golden.MaxReqIDBytes+1), traceID: 9},      // hostile id: grouped by trace id
		rec{reqID: "req-x", inputHash: strings.Repeat("\xff", 100)},              // not a hash
		rec{reqID: "req-y", attrs: map[string]any{"output_length": []any{1, 2}}}, // condition on a list
		rec{reqID: "req-z", stage: "\x00", attrs: map[string]any{golden.ValidAttr: "no"}},
	)
	td := tracesOf(rec{reqID: "req-x", end: -time.Hour, root: true}) // ends before it starts
	td.ResourceSpans().AppendEmpty()                                 // empty resource
	h.send(td, ld)
	h.send(ptrace.NewTraces(), plog.NewLogs())
	require.NoError(t, h.logs.ConsumeLogs(context.Background(), plog.NewLogs()))
	h.wait(time.Minute)
	h.shutdown()
}

func TestTelemetry(t *testing.T) {
	cfg := onlyPolicies(defaultConfig().Policies[0], defaultConfig().Policies[3])
	h := newHarness(t, cfg)
	h.send(requests(4, func(i int, r *rec) {
		r.inputHash = []string{"f7000001", "f7000001", "", "zz"}[i]
		r.statusErr = i == 0
	}))
	h.wait(time.Minute)
	bucket := func(label string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: v, Attributes: attribute.NewSet(attribute.String("bucket", label))}
	}
	metadatatest.AssertEqualProcessorReqsamplingBucketRequests(t, h.tel, []metricdata.DataPoint[int64]{
		bucket("f7", 2), bucket(bucketNone, 1), bucket(bucketOther, 1),
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorReqsamplingBucketFailures(t, h.tel, []metricdata.DataPoint[int64]{bucket("f7", 1)},
		metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorReqsamplingBucketKept(t, h.tel, []metricdata.DataPoint[int64]{bucket("f7", 1)},
		metricdatatest.IgnoreTimestamp())
	decision := func(policy, outcome string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: v, Attributes: attribute.NewSet(attribute.String("policy", policy), attribute.String("outcome", outcome))}
	}
	metadatatest.AssertEqualProcessorReqsamplingDecisions(t, h.tel, []metricdata.DataPoint[int64]{
		decision("errors", "kept", 1), decision(basePolicy, "dropped", 3),
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorReqsamplingPendingRequests(t, h.tel, []metricdata.DataPoint[int64]{{Value: 0}},
		metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorReqsamplingHotInputs(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 0, Attributes: attribute.NewSet(attribute.String("kind", "input_hash"))},
		{Value: 0, Attributes: attribute.NewSet(attribute.String("kind", "bucket"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestFailureMapLookup(t *testing.T) {
	h := newHarness(t, defaultConfig())
	m, ok := LookupFailureMap(h.id)
	require.True(t, ok)
	assert.Empty(t, m.HeatMap().Buckets)
	_, ok = LookupFailureMap(component.MustNewIDWithName("reqsampling", "other"))
	assert.False(t, ok)
	h.shutdown()
	_, ok = LookupFailureMap(h.id)
	assert.False(t, ok, "unregistered at shutdown")
}

func TestCreateRejectsBadConfig(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxRequests = 0
	_, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	assert.ErrorContains(t, err, "max_requests")
}

func TestShutdownWithoutStart(t *testing.T) {
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	p, err := f.CreateLogs(context.Background(), set, defaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(context.Background()))
	require.NoError(t, p.Shutdown(context.Background()))
	_ = componenttest.NewNopHost()
}

func TestTraceIDIsTheFallbackKey(t *testing.T) {
	h := newHarness(t, onlyPolicies(defaultConfig().Policies[0]))
	// A span and a log of one trace, neither with req_id: one request.
	h.send(tracesOf(rec{traceID: 7, root: true, end: time.Second, statusErr: true}), logsOf(rec{traceID: 7}, rec{traceID: 8}))
	h.wait(time.Minute)
	assert.Equal(t, 1, h.traceSink.SpanCount())
	assert.Equal(t, 1, h.logSink.LogRecordCount(), "the other trace's log is another request")
	forEachLog(h.logSink.AllLogs()[0], func(lr plog.LogRecord) { assert.Equal(t, traceIDOf(7), lr.TraceID()) })
}

func TestConditionErrorsAreCounted(t *testing.T) {
	h := newHarness(t, onlyPolicies(PolicyConfig{Name: "busy", Type: FailureCondition,
		FailureCondition: FailureConditionConfig{Conditions: []string{`Int(attributes["n"]) > 1`}}}))
	h.send(ptrace.NewTraces(), logsOf(rec{reqID: id(0), attrs: map[string]any{"n": "many"}}, rec{reqID: id(1), attrs: map[string]any{"n": 5}}))
	h.wait(time.Minute)
	assert.Equal(t, []string{id(1)}, keys(h.out().logs))
	metadatatest.AssertEqualProcessorReqsamplingPolicyErrors(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("policy", "busy"))},
	}, metricdatatest.IgnoreTimestamp())
}

// What the processor hands on is counted where it is handed on, by outcome,
// and no processorhelper count says that nothing went out.
func TestCountsWhatItHandsOn(t *testing.T) {
	cfg := onlyPolicies(PolicyConfig{Name: "errors", Type: Errors, Errors: ErrorsConfig{MinSeverity: "error"}})
	h := newHarness(t, cfg)
	h.send(ptrace.NewTraces(), logsOf(rec{reqID: "failing", severity: plog.SeverityNumberError}, rec{reqID: "failing"}, rec{reqID: "healthy"}))
	h.wait(cfg.DecisionWait)
	require.Equal(t, 2, h.logSink.LogRecordCount())
	metadatatest.AssertEqualProcessorReqsamplingRecords(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("signal", "logs"), attribute.String("outcome", "kept"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("signal", "logs"), attribute.String("outcome", "dropped"))},
	}, metricdatatest.IgnoreTimestamp())
	_, err := h.tel.GetMetric("otelcol_processor_outgoing_items")
	assert.Error(t, err, "records go on after the call returns: a per-call outgoing count would read 0")
}
