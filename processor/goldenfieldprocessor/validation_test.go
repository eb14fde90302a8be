package goldenfieldprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadatatest"
)

// goldenAttrs is a record that honours the contract.
func goldenAttrs() map[string]any {
	return map[string]any{
		golden.ReqID: "req-1715234890123-a1b2c3", golden.Stage: "model/forward", golden.InputHash: "a1b2c3d4",
		golden.ModelVer: "llama3-8b-v2.1.4", golden.LatencyMs: int64(820),
	}
}

func with(attrs map[string]any, kv ...any) map[string]any {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(attrs, kv[i].(string))
		} else {
			attrs[kv[i].(string)] = kv[i+1]
		}
	}
	return attrs
}

func TestValidation(t *testing.T) {
	withConfig := func(mod func(*Config)) *Config {
		cfg := strictConfig()
		mod(cfg)
		return cfg
	}
	celery := withConfig(func(c *Config) { c.Validation.ReqIDFormats = []string{"req-celery-{uuid}", "req_{ts}_{hex}"} })
	tests := []struct {
		name             string
		cfg              *Config
		r                rec
		missing, invalid []string
	}{
		{name: "golden record", r: rec{attrs: goldenAttrs()}},
		{name: "template noise lacks most fields", r: rec{body: "received request"}, missing: []string{"req_id", "stage", "input_hash", "model_ver", "resource_usage.*"}},
		{name: "empty string counts as missing", r: rec{attrs: with(goldenAttrs(), golden.Stage, "")}, missing: []string{"stage"}},
		{name: "bad req_id", r: rec{attrs: with(goldenAttrs(), golden.ReqID, "req-123")}, invalid: []string{"req_id"}},
		{name: "non-string req_id", r: rec{attrs: with(goldenAttrs(), golden.ReqID, int64(7))}, invalid: []string{"req_id"}},
		{name: "celery id without the format", r: rec{attrs: with(goldenAttrs(), golden.ReqID, "req-celery-0f8fad5b-d9cb-469f-a165-70867728950e")}, invalid: []string{"req_id"}},
		{name: "celery id with the format", cfg: celery, r: rec{attrs: with(goldenAttrs(), golden.ReqID, "req-celery-0f8fad5b-d9cb-469f-a165-70867728950e")}},
		{name: "req_{ts}_{hex} format", cfg: celery, r: rec{attrs: with(goldenAttrs(), golden.ReqID, "req_1715234890123_beef")}},
		{name: "bad input_hash and stage", r: rec{attrs: with(goldenAttrs(), golden.InputHash, "XYZ", golden.Stage, "model/for ward!")}, invalid: []string{"input_hash", "stage"}},
		{name: "user pattern", cfg: withConfig(func(c *Config) { c.Validation.Patterns = map[string]string{golden.ModelVer: `-v\d+\.\d+\.\d+$`} }),
			r: rec{attrs: with(goldenAttrs(), golden.ModelVer, "qwen2-7b-chat")}, invalid: []string{"model_ver"}},
		{name: "extra required field", cfg: withConfig(func(c *Config) { c.Validation.Required = []string{"tenant"} }),
			r: rec{attrs: goldenAttrs()}, missing: []string{"tenant"}},
		{
			name:    "full profile",
			cfg:     withConfig(func(c *Config) { c.Validation.Profile = ProfileFull }),
			r:       rec{service: "model", attrs: with(goldenAttrs(), "level", "info", golden.InputTokens, int64(5))},
			missing: []string{"span_id", "event", "status_code", golden.OutputTokens},
		},
		{
			name: "full profile satisfied by record fields",
			cfg:  withConfig(func(c *Config) { c.Validation.Profile = ProfileFull }),
			r: rec{service: "model", attrs: with(goldenAttrs(), "status_code", int64(200), "prompt_tokens", "5", "completion_tokens", int64(9)),
				mutateLog: func(lr plog.LogRecord) {
					lr.SetSpanID(pcommon.SpanID{1})
					lr.SetSeverityNumber(plog.SeverityNumberInfo)
					lr.SetEventName("model.forward")
				}},
		},
		{
			name: "OTTL rule",
			cfg: withConfig(func(c *Config) {
				c.Validation.Rules = []RuleConfig{{Name: "forward_is_fast", Condition: `attributes["resource_usage.latency_ms"] > 500`}}
			}),
			r:       rec{attrs: goldenAttrs()},
			invalid: []string{"rule:forward_is_fast"},
		},
		{
			name: "log-only OTTL rule",
			cfg:  withConfig(func(c *Config) { c.Validation.Rules = []RuleConfig{{Name: "has_body", Condition: `body == nil`}} }),
			r:    rec{attrs: goldenAttrs(), body: "text"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == nil {
				cfg = strictConfig()
			}
			attrs, _ := runOne(t, cfg, tt.r)
			assert.Equal(t, len(tt.missing)+len(tt.invalid) == 0, attrs.AsRaw()[golden.ValidAttr])
			assert.ElementsMatch(t, tt.missing, strList(attrs, golden.MissingAttr), "missing")
			assert.ElementsMatch(t, tt.invalid, strList(attrs, golden.InvalidAttr), "invalid")
		})
	}
}

func TestValidationOfSpans(t *testing.T) {
	cfg := strictConfig()
	cfg.Validation.Rules = []RuleConfig{
		{Name: "span_named", Condition: `name == "span"`},
		{Name: "slow", Condition: `attributes["resource_usage.latency_ms"] > 500`},
	}
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), settings(nil), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeTraces(context.Background(), makeTraces(t,
		rec{attrs: map[string]any{"request_id": "req-1715234890123-a1b2c3", "duration_ms": "820"}})))
	require.NoError(t, p.Shutdown(context.Background()))
	attrs := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	assert.Equal(t, "req-1715234890123-a1b2c3", attrs.AsRaw()[golden.ReqID])
	assert.Equal(t, int64(820), attrs.AsRaw()[golden.LatencyMs])
	assert.ElementsMatch(t, []string{"stage", "input_hash", "model_ver"}, strList(attrs, golden.MissingAttr))
	assert.ElementsMatch(t, []string{"rule:span_named", "rule:slow"}, strList(attrs, golden.InvalidAttr))
}

func TestDropAction(t *testing.T) {
	records := []rec{
		{attrs: goldenAttrs()},
		{attrs: with(goldenAttrs(), golden.ReqID, nil)},
		{attrs: with(goldenAttrs(), golden.Stage, nil)},
		{attrs: with(goldenAttrs(), golden.ReqID, "bogus")},
	}
	tests := []struct {
		name    string
		reasons []string
		kept    []int // indexes of records that pass
		dropped map[string]int64
	}{
		{name: "every failure", kept: []int{0}, dropped: map[string]int64{"missing": 2, "invalid": 1}},
		{name: "missing req_id only", reasons: []string{"missing:req_id"}, kept: []int{0, 2, 3}, dropped: map[string]int64{"missing": 1}},
		{name: "invalid only", reasons: []string{"invalid"}, kept: []int{0, 1, 2}, dropped: map[string]int64{"invalid": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			cfg := strictConfig()
			cfg.Action = ActionConfig{Mode: ActionDrop, DropReasons: tt.reasons}
			for i := range records {
				records[i].attrs["idx"] = int64(i)
			}
			sink := new(consumertest.LogsSink)
			p, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), cfg, sink)
			require.NoError(t, err)
			require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t, records...)))
			require.NoError(t, p.Shutdown(context.Background()))
			var kept []int
			for _, lr := range logRecords(sink.AllLogs()) {
				kept = append(kept, int(lr.Attributes().AsRaw()["idx"].(int64)))
			}
			assert.Equal(t, tt.kept, kept)

			var want []metricdata.DataPoint[int64]
			for reason, n := range tt.dropped {
				want = append(want, metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("reason", reason))})
			}
			metadatatest.AssertEqualProcessorGoldenfieldRecordsDropped(t, tel, want, metricdatatest.IgnoreTimestamp())
			metadatatest.AssertEqualProcessorGoldenfieldRecordsOut(t, tel, []metricdata.DataPoint[int64]{{Value: int64(len(tt.kept))}}, metricdatatest.IgnoreTimestamp())
		})
	}
}

func TestAllDroppedSkipsTheRestOfThePipeline(t *testing.T) {
	cfg := strictConfig()
	cfg.Action.Mode = ActionDrop
	cfg.Drift.Enabled = false
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t, rec{body: "noise"})))
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Empty(t, sink.AllLogs())
}

func TestMetricsPassThrough(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	p, err := NewFactory().CreateMetrics(context.Background(), settings(nil), defaultConfig(), sink)
	require.NoError(t, err)
	in := makeMetrics()
	require.NoError(t, p.ConsumeMetrics(context.Background(), in))
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, sink.AllMetrics(), 1)
	assert.Equal(t, makeMetrics(), sink.AllMetrics()[0])
}

func TestValidationJudgesARecordByWhatItsServiceCarries(t *testing.T) {
	shop := func(attrs map[string]any) rec {
		return rec{service: "checkout", attrs: attrs}
	}
	logs := runLogs(t, defaultConfig(), makeLogs(t,
		// A service that writes none of the golden fields: nothing is missing.
		shop(map[string]any{"http.route": "/cart"}),
		shop(map[string]any{"http.route": "/pay"}),
		// An inference service that carries them all, then drops one.
		rec{service: "llm", attrs: goldenAttrs()},
		rec{service: "llm", attrs: with(goldenAttrs(), golden.InputHash, nil)},
		// The shop starts writing a stage: from then on it must.
		shop(map[string]any{golden.Stage: "cart/add"}),
		shop(map[string]any{"http.route": "/cart"}),
	))
	require.Len(t, logs, 6)
	missing := func(i int) []string { return strList(logs[i].Attributes(), golden.MissingAttr) }
	for _, i := range []int{0, 1, 2} {
		assert.Empty(t, missing(i), "record %d", i)
		assert.Equal(t, true, logs[i].Attributes().AsRaw()[golden.ValidAttr], "record %d", i)
	}
	assert.Equal(t, []string{golden.InputHash}, missing(3), "a field its service carried is missing")
	assert.Empty(t, missing(4))
	assert.Equal(t, []string{golden.Stage}, missing(5))
}

func TestATraceKeyIsAValidReqIDOnlyWhenMarked(t *testing.T) {
	key := "4bf92f3577b34da6a3ce929d0e0e4736"
	marked, _ := runOne(t, strictConfig(), rec{attrs: with(goldenAttrs(), golden.ReqID, key, golden.ReqIDFrom, golden.ReqIDFromTrace)})
	assert.Empty(t, strList(marked, golden.InvalidAttr))
	unmarked, _ := runOne(t, strictConfig(), rec{attrs: with(goldenAttrs(), golden.ReqID, key)})
	assert.Equal(t, []string{golden.ReqID}, strList(unmarked, golden.InvalidAttr))
	notAKey, _ := runOne(t, strictConfig(), rec{attrs: with(goldenAttrs(), golden.ReqID, "not-a-trace", golden.ReqIDFrom, golden.ReqIDFromTrace)})
	assert.Equal(t, []string{golden.ReqID}, strList(notAKey, golden.InvalidAttr))
}

// A component's logs and traces pipelines judge a service by what either
// has seen it carry: a service whose spans carry a stage is held to it in
// its log lines too.
func TestWhatAServiceCarriesIsSharedByAComponentsPipelines(t *testing.T) {
	f := NewFactory()
	set := settings(nil)
	spans, lines := new(consumertest.TracesSink), new(consumertest.LogsSink)
	traces, err := f.CreateTraces(context.Background(), set, defaultConfig(), spans)
	require.NoError(t, err)
	logs, err := f.CreateLogs(context.Background(), set, defaultConfig(), lines)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, traces.Shutdown(context.Background()))
		require.NoError(t, logs.Shutdown(context.Background()))
	}()
	require.NoError(t, traces.ConsumeTraces(context.Background(), makeTraces(t, rec{service: "router", attrs: map[string]any{golden.Stage: "route/pick"}})))
	require.NoError(t, logs.ConsumeLogs(context.Background(), makeLogs(t, rec{service: "router", attrs: map[string]any{"http.route": "/pick"}})))
	out := logRecords(lines.AllLogs())
	require.Len(t, out, 1)
	assert.Contains(t, strList(out[0].Attributes(), golden.MissingAttr), golden.Stage)

	// Another component learns apart.
	other := new(consumertest.LogsSink)
	set.ID = component.MustNewIDWithName(metadata.Type.String(), "other")
	p, err := f.CreateLogs(context.Background(), set, defaultConfig(), other)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t, rec{service: "router", attrs: map[string]any{"http.route": "/pick"}})))
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Empty(t, strList(logRecords(other.AllLogs())[0].Attributes(), golden.MissingAttr))
}
