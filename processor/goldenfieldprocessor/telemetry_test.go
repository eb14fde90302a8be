package goldenfieldprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/internal/canarytest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadatatest"
)

func TestTelemetry(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := strictConfig()
	cfg.MaxServices = 2
	p, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t,
		rec{service: "gateway", attrs: goldenAttrs()},
		rec{service: "gateway", attrs: with(goldenAttrs(), "prompt", "hi", "api_key", "k")},
		rec{service: "gateway", body: "received request user a@b.io"},
		rec{service: "preproc", attrs: with(goldenAttrs(), golden.ReqID, "bad")},
		rec{service: "cache", body: `{"broken": `},
		rec{service: "cache", body: "x=\xff"},
	)))
	ignore := metricdatatest.IgnoreTimestamp()
	attr := func(kv ...string) attribute.Set {
		var kvs []attribute.KeyValue
		for i := 0; i < len(kv); i += 2 {
			kvs = append(kvs, attribute.String(kv[i], kv[i+1]))
		}
		return attribute.NewSet(kvs...)
	}
	// gateway: 1 invalid / 2 valid; preproc: 1 invalid / 0 valid; cache is past max_services.
	metadatatest.AssertEqualProcessorGoldenfieldLogNoiseRatio(t, tel, []metricdata.DataPoint[float64]{
		{Value: 0.5, Attributes: attr("service", "gateway")},
		{Value: 1, Attributes: attr("service", "preproc")},
		{Value: 2, Attributes: attr("service", "_other")},
	}, ignore)
	require.NoError(t, p.Shutdown(context.Background()))

	one := func(v int64) []metricdata.DataPoint[int64] { return []metricdata.DataPoint[int64]{{Value: v}} }
	metadatatest.AssertEqualProcessorGoldenfieldRecordsIn(t, tel, one(6), ignore)
	metadatatest.AssertEqualProcessorGoldenfieldRecordsOut(t, tel, one(6), ignore)
	metadatatest.AssertEqualProcessorGoldenfieldRecordsValid(t, tel, one(2), ignore)
	metadatatest.AssertEqualProcessorGoldenfieldRecordsInvalid(t, tel, one(4), ignore)

	metadatatest.AssertEqualProcessorGoldenfieldRedactions(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attr("target", "input")},
		{Value: 1, Attributes: attr("target", "attribute")},
		{Value: 1, Attributes: attr("target", "body")},
	}, ignore)
	metadatatest.AssertEqualProcessorGoldenfieldSanitized(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attr("issue", "invalid_json")},
		{Value: 1, Attributes: attr("issue", "invalid_utf8")},
	}, ignore)
	var failures []metricdata.DataPoint[int64]
	for _, f := range []string{"req_id", "stage", "input_hash", "model_ver", "resource_usage.*"} {
		failures = append(failures, metricdata.DataPoint[int64]{Value: 3, Attributes: attr("field", f, "reason", "missing")})
	}
	failures = append(failures, metricdata.DataPoint[int64]{Value: 1, Attributes: attr("field", "req_id", "reason", "invalid")})
	metadatatest.AssertEqualProcessorGoldenfieldValidationFailures(t, tel, failures, ignore)
}

// Every placement counts its redactions under its own target.
func TestRedactionTargets(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	p, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), defaultConfig(), new(consumertest.TracesSink))
	require.NoError(t, err)
	td, sp := canarytest.NewSpanParts()
	sp.Resource.Resource().Attributes().PutStr("gen_ai.prompt", "x")
	sp.Scope.Scope().Attributes().PutEmptyMap("request").PutStr("prompt", "x")
	sp.Span.Attributes().PutStr("gen_ai.prompt.0.content", "x")      // input
	sp.Span.Attributes().PutEmptyMap("user").PutStr("password", "x") // attribute
	sp.Span.Attributes().PutStr("note", "write to a@b.io or c@d.io") // attribute, twice
	sp.Span.SetName("chat a@b.io")                                   // span_name
	sp.Span.Status().SetMessage(`bad prompt: "x"`)                   // status_message
	e := sp.Span.Events().AppendEmpty()                              // event, twice
	e.SetName("gen_ai.user.message")
	e.Attributes().PutStr("content", "x")
	e.Attributes().PutStr("message", "x")
	sp.Span.Links().AppendEmpty().Attributes().PutStr("output.value", "x") // link
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.Shutdown(context.Background()))
	var want []metricdata.DataPoint[int64]
	for target, n := range map[string]int64{"input": 1, "attribute": 3, "resource": 1, "scope": 1, "event": 2, "link": 1, "span_name": 1, "status_message": 1} {
		want = append(want, metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("target", target))})
	}
	metadatatest.AssertEqualProcessorGoldenfieldRedactions(t, tel, want, metricdatatest.IgnoreTimestamp())
}
