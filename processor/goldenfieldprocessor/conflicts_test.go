package goldenfieldprocessor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadatatest"
)

var aliasConflictCases = []struct {
	name      string
	models    map[string]string
	attrs     map[string]any
	want      map[string]any // the winners, as before conflicts were kept
	conflicts []string       // golden.conflicts; nil: absent
}{
	{
		name:      "two aliases, different values: the first in name order wins, the other is kept",
		attrs:     map[string]any{"request_id": "req-1715234890123-aaaaaa", "inference_id": "req-1715234890123-bbbbbb"},
		want:      map[string]any{golden.ReqID: "req-1715234890123-bbbbbb"},
		conflicts: []string{"req_id request_id=req-1715234890123-aaaaaa"},
	},
	{
		name:  "two aliases, equal values: no conflict",
		attrs: map[string]any{"request_id": "req-1715234890123-aaaaaa", "inference_id": "req-1715234890123-aaaaaa"},
		want:  map[string]any{golden.ReqID: "req-1715234890123-aaaaaa"},
	},
	{
		name:  "one alias: no conflict",
		attrs: map[string]any{"request_id": "req-1715234890123-aaaaaa"},
		want:  map[string]any{golden.ReqID: "req-1715234890123-aaaaaa"},
	},
	{
		name:      "the canonical name wins; each alias that differs is kept, one that agrees is not",
		attrs:     map[string]any{golden.ReqID: "req-1715234890123-canon1", "request_id": "req-1715234890123-alias1", "x_request_id": "req-1715234890123-canon1", "x-request-id": 7},
		want:      map[string]any{golden.ReqID: "req-1715234890123-canon1"},
		conflicts: []string{"req_id request_id=req-1715234890123-alias1", "req_id x-request-id=7"},
	},
	{
		name:  "equal after the alias's prefix is trimmed",
		attrs: map[string]any{"gen_ai.request.id": "chatcmpl-req-1715234890123-aaaaaa", "request_id": "req-1715234890123-aaaaaa"},
		want:  map[string]any{golden.ReqID: "req-1715234890123-aaaaaa"},
	},
	{
		name:  "equal as numbers",
		attrs: map[string]any{"latency_ms": "2340", "duration_ms": 2340.0},
		want:  map[string]any{golden.LatencyMs: 2340.0},
	},
	{
		name:      "different numbers",
		attrs:     map[string]any{"latency_ms": 12, "duration_ms": 2340},
		want:      map[string]any{golden.LatencyMs: int64(2340)},
		conflicts: []string{"resource_usage.latency_ms latency_ms=12"},
	},
	{
		name:  "a gen_ai source that loses stays on the record: nothing lost",
		attrs: map[string]any{"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06"},
		want:  map[string]any{golden.ModelVer: "gpt-4o-2024-08-06", "gen_ai.request.model": "gpt-4o"},
	},
	{
		name:      "a preferred alias wins over the plain ones",
		attrs:     map[string]any{"gen_ai.response.model": "gpt-4o-2024-08-06", "model_name": "gpt-4o"},
		want:      map[string]any{golden.ModelVer: "gpt-4o-2024-08-06"},
		conflicts: []string{"model_ver model_name=gpt-4o"},
	},
	{
		name:   "equal through normalize::models",
		models: map[string]string{"qwen": "qwen2-7b-chat"},
		attrs:  map[string]any{"model": "qwen", "model_name": "qwen2-7b-chat"},
		want:   map[string]any{golden.ModelVer: "qwen2-7b-chat"},
	},
}

func TestAliasConflictsLogs(t *testing.T) {
	for _, tt := range aliasConflictCases {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Normalize.Models = tt.models
			attrs, _ := runOne(t, cfg, rec{attrs: tt.attrs})
			checkConflicts(t, attrs, tt.want, tt.conflicts)
		})
	}
}

func TestAliasConflictsSpans(t *testing.T) {
	for _, tt := range aliasConflictCases {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Normalize.Models = tt.models
			spans := runSpans(t, cfg, rec{attrs: tt.attrs})
			require.Len(t, spans, 1)
			checkConflicts(t, spans[0].Attributes(), tt.want, tt.conflicts)
		})
	}
}

func checkConflicts(t *testing.T, attrs pcommon.Map, want map[string]any, conflicts []string) {
	t.Helper()
	for k, v := range want {
		assert.Equal(t, v, attrs.AsRaw()[k], k)
	}
	assert.Equal(t, conflicts, strList(attrs, golden.ConflictsAttr))
	for _, alias := range []string{"request_id", "inference_id", "x_request_id", "x-request-id", "latency_ms", "duration_ms", "model", "model_name"} {
		assert.NotContains(t, attrs.AsRaw(), alias, "aliases are still removed")
	}
}

func runSpans(t *testing.T, cfg *Config, recs ...rec) []ptrace.Span {
	t.Helper()
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), settings(nil), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeTraces(context.Background(), makeTraces(t, recs...)))
	require.NoError(t, p.Shutdown(context.Background()))
	return allSpans(sink.AllTraces()...)
}

// The losing value of an alias of a content-bearing or sensitive field is
// redacted in golden.conflicts; in other losing values, content keys of a map
// and body patterns are.
func TestAliasConflictsRedacted(t *testing.T) {
	for mode, nested := range map[RedactionMode]string{
		RedactionRemove: `{"name":"m2"}`,
		RedactionMask:   `{"name":"m2","prompt":"[REDACTED]"}`,
	} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Redaction.Mode = mode
			cfg.Normalize.Aliases = map[string]string{"query_text": "prompt", "bearer": "api_key"}
			attrs, lr := runOne(t, cfg, rec{attrs: map[string]any{
				"prompt":         "SECRET-winner",
				"query_text":     "SECRET-loser",
				"api_key":        "k1",
				"bearer":         "SECRET-key",
				"llm.model_name": "llama3-8b-v2.1.4",
				"model":          map[string]any{"name": "m2", "prompt": "SECRET-nested"},
				"model_name":     "ask bob@example.com",
			}})
			assert.Equal(t, []string{ // in the aliases' name order
				"api_key bearer=[REDACTED]",
				"model_ver model=" + nested,
				"model_ver model_name=ask [REDACTED]",
				"prompt query_text=[REDACTED]",
			}, strList(attrs, golden.ConflictsAttr))
			raw := fmt.Sprint(attrs.AsRaw())
			assert.NotContains(t, raw, "SECRET")
			assert.NotContains(t, raw, "bob@")
			assert.NotContains(t, lr.Body().AsString(), "SECRET")
		})
	}
	t.Run("redaction off", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Redaction.Enabled = false
		cfg.Normalize.Aliases = map[string]string{"query_text": "prompt"}
		attrs, _ := runOne(t, cfg, rec{attrs: map[string]any{"prompt": "a", "query_text": "b"}})
		assert.Equal(t, []string{"prompt query_text=b"}, strList(attrs, golden.ConflictsAttr))
	})
}

// Each conflict is counted by golden field; a record keeps maxConflicts of
// them, and the rest are counted as sanitized (too_many_conflicts).
func TestAliasConflictsCountedAndBounded(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := defaultConfig()
	cfg.Normalize.Aliases = map[string]string{}
	many := map[string]any{"team": "canonical"}
	for i := range maxConflicts + 2 {
		alias := fmt.Sprintf("team_%02d", i)
		cfg.Normalize.Aliases[alias] = "team"
		many[alias] = alias
	}
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t,
		rec{attrs: many},
		rec{attrs: map[string]any{"request_id": "a", "inference_id": "b", "model": "x", "model_name": "y"}},
		rec{attrs: map[string]any{"request_id": "a", "inference_id": "a"}},
	)))
	require.NoError(t, p.Shutdown(context.Background()))

	out := logRecords(sink.AllLogs())
	require.Len(t, out, 3)
	kept := strList(out[0].Attributes(), golden.ConflictsAttr)
	require.Len(t, kept, maxConflicts)
	assert.Equal(t, "team team_00=team_00", kept[0], "kept in name order")
	assert.Equal(t, "team team_07=team_07", kept[maxConflicts-1])
	assert.Len(t, strList(out[1].Attributes(), golden.ConflictsAttr), 2)
	assert.Nil(t, strList(out[2].Attributes(), golden.ConflictsAttr))

	ignore := metricdatatest.IgnoreTimestamp()
	field := func(name string, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("field", name))}
	}
	metadatatest.AssertEqualProcessorGoldenfieldAliasConflicts(t, tel, []metricdata.DataPoint[int64]{
		field("team", maxConflicts+2), field(golden.ReqID, 1), field(golden.ModelVer, 1),
	}, ignore)
	metadatatest.AssertEqualProcessorGoldenfieldSanitized(t, tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("issue", "too_many_conflicts"))},
	}, ignore)
}

// golden.conflicts describes how a record was read: a schema drift tracker
// does not count it as one of the service's fields.
func TestConflictsIsOutcome(t *testing.T) {
	assert.True(t, golden.IsOutcomeAttr(golden.ConflictsAttr))
	assert.True(t, golden.IsLoomAttr(golden.ConflictsAttr))
}
