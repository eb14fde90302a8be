package eventgraphexporter

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

var (
	t0      = time.Date(2025, 5, 9, 12, 0, 0, 0, time.UTC)
	traceID = pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	spanA   = pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1}
	spanB   = pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	causeID = strings.Repeat("ab", 16)
	rootID  = strings.Repeat("cd", 16)
)

var conv = newConverter(4096)

func resource(res pcommon.Resource) {
	res.Attributes().PutStr(string(semconv.ServiceNameKey), "model")
	res.Attributes().PutStr(string(semconv.HostNameKey), "gpu-node-1")
	res.Attributes().PutStr(golden.ModelVer, "llama3-8b-v2.3.1") // a resource-level golden field
}

// oneLog returns logs holding one record, prepared by fill.
func oneLog(fill func(lr plog.LogRecord)) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	resource(rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("engine")
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0))
	fill(lr)
	return ld
}

func TestConvertLog(t *testing.T) {
	ld := oneLog(func(lr plog.LogRecord) {
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.SetSeverityText("ERROR")
		lr.Body().SetStr("forward failed: CUDA error")
		lr.SetTraceID(traceID)
		lr.SetSpanID(spanA)
		a := lr.Attributes()
		a.PutStr(golden.EventID, strings.Repeat("0f", 16))
		a.PutStr(golden.ReqID, "req-1715234890123-a1b2c3")
		a.PutStr(golden.Stage, "model/forward")
		a.PutStr(golden.InputHash, "f7a1b2c3")
		a.PutStr(golden.ModelVer, "llama3-8b-v2.3.2") // the record's value wins over the resource's
		a.PutStr(golden.GPUID, "GPU-0")
		a.PutInt(golden.GPUMemMb, 10200)
		a.PutDouble(golden.LatencyMs, 4200.5)
		a.PutBool(golden.ValidAttr, false)
		a.PutEmptySlice(golden.MissingAttr).AppendEmpty().SetStr(golden.InputHash)
		a.PutStr("http.route", "/v1/chat") // not a golden fact: its name is kept, and its value as a dimension
		a.PutStr(golden.StitchAsyncOf, rootID)
		parents := a.PutEmptySlice(golden.CausalParents)
		parents.AppendEmpty().SetStr(causeID + ":caused_timeout")
		a.PutEmptySlice(golden.CausalRules).AppendEmpty().SetStr("gpu_oom_cause_timeout")
	})
	events, st := conv.logs(ld)
	require.Len(t, events, 1)
	assert.Equal(t, eventgraph.Event{
		ID: strings.Repeat("0f", 16), Kind: eventgraph.KindLog, Time: t0,
		ReqID: "req-1715234890123-a1b2c3", Stage: "model/forward", ModelVer: "llama3-8b-v2.3.2", InputHash: "f7a1b2c3",
		Service: "model", Host: "gpu-node-1", GPU: "GPU-0",
		SeverityNumber: 17, SeverityText: "ERROR", Failed: true, Message: "forward failed: CUDA error",
		TraceID: traceID.String(), SpanID: spanA.String(), AsyncOf: rootID,
		Causes: []eventgraph.Cause{{EventID: causeID, Type: "caused_timeout", Rule: "gpu_oom_cause_timeout"}},
		Attrs: map[string]any{
			golden.GPUMemMb: 10200.0, golden.LatencyMs: 4200.5, golden.ValidAttr: false,
			golden.MissingAttr: []string{golden.InputHash}, eventgraph.FieldsAttr: []string{"http.route"},
		},
		Dims: []string{"http.route=/v1/chat"},
	}, events[0])
	assert.Equal(t, convStats{edges: 3}, st, "a cause, an async root and the enclosing span")
}

func TestConvertSpan(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	resource(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	span := ss.Spans().AppendEmpty()
	span.SetName("model/forward")
	span.SetTraceID(traceID)
	span.SetSpanID(spanB)
	span.SetParentSpanID(spanA)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
	span.Status().SetCode(ptrace.StatusCodeError)
	span.Status().SetMessage("TimeLimitExceeded(300)")
	span.Attributes().PutStr(golden.ReqID, "req-celery-0b0d6f4e-8c1d-4bd5-9d5e-0e4f3c2a1b00")

	events, st := conv.traces(td)
	require.Len(t, events, 1)
	assert.Equal(t, eventgraph.Event{
		ID: golden.SpanEventHash(rs.Resource(), ss.Scope(), span).String(), Kind: eventgraph.KindSpan,
		Time: t0, End: t0.Add(time.Second), ReqID: "req-celery-0b0d6f4e-8c1d-4bd5-9d5e-0e4f3c2a1b00",
		ModelVer: "llama3-8b-v2.3.1", Service: "model", Host: "gpu-node-1",
		Status: "error", Failed: true, Name: "model/forward", Message: "TimeLimitExceeded(300)",
		TraceID: traceID.String(), SpanID: spanB.String(), ParentSpanID: spanA.String(),
	}, events[0])
	assert.Equal(t, convStats{idsComputed: 1, edges: 1}, st)
}

func TestFailureDefinition(t *testing.T) {
	for name, tc := range map[string]struct {
		fill   func(lr plog.LogRecord)
		failed bool
	}{
		"warn":       {func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberWarn4) }, false},
		"error":      {func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberError) }, true},
		"fatal":      {func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberFatal) }, true},
		"error.type": {func(lr plog.LogRecord) { lr.Attributes().PutStr(string(semconv.ErrorTypeKey), "timeout") }, true},
		"unset":      {func(plog.LogRecord) {}, false},
	} {
		events, _ := conv.logs(oneLog(tc.fill))
		assert.Equal(t, tc.failed, events[0].Failed, name)
	}
}

// The verdict's reasons are stored as text on each record of a failed request.
func TestVerdictReasonsAreStored(t *testing.T) {
	events, _ := conv.logs(oneLog(func(lr plog.LogRecord) {
		v := failure.Verdict{}
		v.Add(failure.Reason{Kind: failure.KindValueDrift, Service: "renderer", Stage: "render/finish", Attribute: "frame.empty",
			Value: "true", Baseline: 0, Current: 0.025})
		v.Annotate(lr.Attributes())
	}))
	assert.Equal(t, []string{"value_drift: frame.empty=true at render/finish (renderer): 0.0% of the baseline, 2.5% now"},
		events[0].Attrs[failure.ReasonsAttr])
	events, _ = conv.logs(oneLog(func(lr plog.LogRecord) { (&failure.Verdict{}).Annotate(lr.Attributes()) }))
	assert.NotContains(t, events[0].Attrs, failure.ReasonsAttr, "a healthy request has no reasons")
}

// TestMissingEventIDIsComputed: a record without event.id, or with one that is
// not an event id, gets the identity reqidstitch would have given it.
func TestMissingEventIDIsComputed(t *testing.T) {
	for name, id := range map[string]any{"absent": nil, "not hex": `"}) DETACH DELETE n`, "short": "abcd", "an int": 42} {
		ld := oneLog(func(lr plog.LogRecord) {
			lr.Body().SetStr("received request")
			switch v := id.(type) {
			case string:
				lr.Attributes().PutStr(golden.EventID, v)
			case int:
				lr.Attributes().PutInt(golden.EventID, int64(v))
			}
		})
		rl := ld.ResourceLogs().At(0)
		want := golden.LogEventHash(rl.Resource(), rl.ScopeLogs().At(0).Scope(), rl.ScopeLogs().At(0).LogRecords().At(0)).String()
		events, st := conv.logs(ld)
		assert.Equal(t, want, events[0].ID, name)
		assert.Equal(t, 1, st.idsComputed, name)
	}
}

func TestObservedTimeWhenTimestampUnset(t *testing.T) {
	events, _ := conv.logs(oneLog(func(lr plog.LogRecord) {
		lr.SetTimestamp(0)
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Minute)))
	}))
	assert.Equal(t, t0.Add(time.Minute), events[0].Time)
}

// TestTimesPastInt64AreClamped: a timestamp past 2262 does not fit the
// stores' int64 nanoseconds; it must not wrap to before 1970.
func TestTimesPastInt64AreClamped(t *testing.T) {
	far := pcommon.Timestamp(math.MaxUint64)
	logs, st := conv.logs(oneLog(func(lr plog.LogRecord) { lr.SetTimestamp(far) }))
	last := time.Unix(0, math.MaxInt64).UTC()
	assert.Equal(t, last, logs[0].Time.UTC())
	assert.Equal(t, 1, st.sanitized)

	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	span.SetEndTimestamp(far)
	spans, st := conv.traces(td)
	assert.Equal(t, t0, spans[0].Time.UTC())
	assert.Equal(t, last, spans[0].End.UTC())
	assert.Equal(t, 1, st.sanitized)
}

// TestLongReqIDMakesNoRequest: cut to the property bound, two long ids
// sharing a prefix would become one request.
func TestLongReqIDMakesNoRequest(t *testing.T) {
	events, st := conv.logs(oneLog(func(lr plog.LogRecord) {
		lr.Attributes().PutStr(golden.ReqID, "req-"+strings.Repeat("x", golden.MaxReqIDBytes))
	}))
	assert.Empty(t, events[0].ReqID)
	assert.Equal(t, 1, st.invalidRefs)
}

func TestARecordWithoutReqIDBelongsToTheRequestItsTraceKeys(t *testing.T) {
	trace := pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35}
	events, _ := conv.logs(oneLog(func(lr plog.LogRecord) { lr.SetTraceID(trace) }))
	assert.Equal(t, golden.TraceKey(trace), events[0].ReqID)
	assert.Equal(t, golden.ReqIDFromTrace, events[0].Attrs[eventgraph.KeyAttr])

	// As reqidstitch keyed it: the same request, said the same way.
	events, _ = conv.logs(oneLog(func(lr plog.LogRecord) {
		lr.SetTraceID(trace)
		lr.Attributes().PutStr(golden.ReqID, golden.TraceKey(trace))
		lr.Attributes().PutStr(golden.ReqIDFrom, golden.ReqIDFromTrace)
	}))
	assert.Equal(t, golden.TraceKey(trace), events[0].ReqID)
	assert.Equal(t, golden.ReqIDFromTrace, events[0].Attrs[eventgraph.KeyAttr])
	assert.Nil(t, events[0].Attrs[eventgraph.FieldsAttr], "Loom's own attributes are no field of the record")

	// A req_id of its own keys it, whatever its trace.
	events, _ = conv.logs(oneLog(func(lr plog.LogRecord) {
		lr.SetTraceID(trace)
		lr.Attributes().PutStr(golden.ReqID, "req-1")
	}))
	assert.Equal(t, "req-1", events[0].ReqID)
	assert.NotContains(t, events[0].Attrs, eventgraph.KeyAttr)
}

func TestInvalidReferencesAreCounted(t *testing.T) {
	events, st := conv.logs(oneLog(func(lr plog.LogRecord) {
		a := lr.Attributes()
		a.PutStr(golden.StitchAsyncOf, "not-an-id")
		parents := a.PutEmptySlice(golden.CausalParents)
		for _, entry := range []string{causeID + ":triggered", "nonsense", causeID, causeID + ":", "zz:retry_of", rootID + ":retry_of"} {
			parents.AppendEmpty().SetStr(entry)
		}
		a.PutEmptySlice(golden.CausalRules).AppendEmpty().SetStr("cache_miss_trigger_inference") // only the first has a rule
	}))
	assert.Equal(t, []eventgraph.Cause{
		{EventID: causeID, Type: "triggered", Rule: "cache_miss_trigger_inference"},
		{EventID: rootID, Type: "retry_of"},
	}, events[0].Causes)
	assert.Empty(t, events[0].AsyncOf)
	assert.Equal(t, 5, st.invalidRefs)

	events, _ = conv.logs(oneLog(func(lr plog.LogRecord) {
		lr.Attributes().PutStr(golden.CausalParents, causeID+":triggered") // one entry as a plain string
	}))
	assert.Equal(t, []eventgraph.Cause{{EventID: causeID, Type: "triggered"}}, events[0].Causes)
}

func TestOversizedPropertiesAreTruncatedAndCounted(t *testing.T) {
	c := newConverter(64)
	long := strings.Repeat("é", 100) // 2 bytes per rune: the cut must not split one
	events, st := c.logs(oneLog(func(lr plog.LogRecord) {
		lr.Body().SetStr(long)
		lr.Attributes().PutStr(golden.ReqID, long)
		lr.Attributes().PutStr(golden.Stage, "model/forward")
	}))
	e := events[0]
	assert.Equal(t, strings.Repeat("é", 32), e.Message)
	assert.Equal(t, strings.Repeat("é", 32), e.ReqID)
	assert.Equal(t, "model/forward", e.Stage)
	assert.Equal(t, 2, st.truncated)
	assert.Equal(t, 2.0, e.Attrs[eventgraph.TruncatedAttr], "the event says how many of its properties were cut")

	odd := strings.Repeat("x", 63) + "é" // the cut falls inside the last rune
	events, _ = c.logs(oneLog(func(lr plog.LogRecord) { lr.Body().SetStr(odd) }))
	assert.Equal(t, strings.Repeat("x", 63), events[0].Message)
}

func TestUnsafeValuesAreSanitized(t *testing.T) {
	events, st := conv.logs(oneLog(func(lr plog.LogRecord) {
		lr.Body().SetStr("bad \xff\xfe utf-8")
		lr.Attributes().PutDouble(golden.LatencyMs, math.NaN())
		lr.Attributes().PutDouble(golden.Tokens, math.Inf(1))
		lr.Attributes().PutDouble(golden.SamplingAdjustedCount, math.Inf(1))
	}))
	e := events[0]
	assert.Equal(t, "bad \uFFFD utf-8", e.Message)
	assert.Equal(t, "NaN", e.Attrs[golden.LatencyMs])
	assert.Equal(t, "+Inf", e.Attrs[golden.Tokens])
	assert.Zero(t, e.AdjustedCount, "a weight that is no number is none")
	assert.Equal(t, 4, st.sanitized)
}

func TestBodyOfAnyTypeIsText(t *testing.T) {
	events, _ := conv.logs(oneLog(func(lr plog.LogRecord) {
		m := lr.Body().SetEmptyMap()
		m.PutStr("msg", "forward done")
		m.PutInt("duration_ms", 820)
	}))
	assert.JSONEq(t, `{"msg":"forward done","duration_ms":820}`, events[0].Message)
}

// An event fails by the failure model: a body that is an error only in its
// text, or the place a request's verdict names as its evidence.
func TestConvertFailedByTheFailureModel(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "renderer")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	verdict := failure.Verdict{}
	verdict.Add(failure.Reason{Kind: failure.KindValueDrift, Service: "renderer", Stage: "render/finish", Attribute: "frame.empty", Value: "true"})
	for _, stage := range []string{"render/finish", "render/start"} {
		lr := lrs.AppendEmpty()
		lr.Body().SetStr("INFO frame done")
		lr.Attributes().PutStr(golden.ReqID, "req-1715234890000-abcdef")
		lr.Attributes().PutStr(golden.Stage, stage)
		verdict.Annotate(lr.Attributes())
	}
	text := lrs.AppendEmpty()
	text.Body().SetStr("2024-05-01 12:00:00,123 - writer - ERROR - shard is read-only")
	text.Attributes().PutStr(golden.ReqID, "req-1715234890001-abcdef")
	events, _ := conv.logs(ld)
	require.Len(t, events, 3)
	assert.True(t, events[0].Failed, "the place the verdict names")
	assert.False(t, events[1].Failed, "another place of the failed request")
	assert.True(t, events[2].Failed, "an error in the text only")
}

// TestDimensionsAreDiscovered: attributes whose values stay few are listed as
// dimensions, whatever their names, from the record and its resource; ids,
// measurements, error reports and Loom's own annotations are not; the
// request's symptoms and its sampling weight travel beside them.
func TestDimensionsAreDiscovered(t *testing.T) {
	c := newConverter(4096)
	var last []eventgraph.Event
	for i := range 200 {
		ld := oneLog(func(lr plog.LogRecord) {
			a := lr.Attributes()
			a.PutStr(golden.ReqID, fmt.Sprintf("req-%d", i))
			a.PutStr("prompt.template", fmt.Sprintf("tpl-%d", i%3))
			a.PutStr("client.request_id", fmt.Sprintf("c-%d", i)) // an id: too many values
			a.PutInt("gpu.index", int64(i%8))
			a.PutDouble("temperature", 0.7) // a float is a measurement
			a.PutBool("stream", i%2 == 0)
			a.PutStr("error.type", "timeout")
			a.PutStr("cloud.region", "us-east") // shadows the resource's
			a.PutDouble(golden.SamplingAdjustedCount, 100)
			var v failure.Verdict
			v.Add(failure.Reason{Kind: failure.KindValueDrift, Attribute: "verdict.grade", Value: "poor"})
			v.Annotate(a)
		})
		rl := ld.ResourceLogs().At(0)
		rl.Resource().Attributes().PutStr("cloud.region", "eu-west")
		rl.Resource().Attributes().PutStr("k8s.pod.uid", fmt.Sprintf("uid-%d", i))
		rl.Resource().Attributes().PutStr("lora.adapter", "sql-v1")
		last, _ = c.logs(ld)
	}
	require.Len(t, last, 1)
	e := last[0]
	assert.Equal(t, []string{"cloud.region=us-east", "gpu.index=7", "lora.adapter=sql-v1", "prompt.template=tpl-1", "stream=false"},
		e.Dims)
	assert.Equal(t, []string{"verdict.grade"}, e.Attrs[eventgraph.SymptomsAttr])
	assert.InDelta(t, 100.0, e.AdjustedCount, 0)
	assert.NotContains(t, e.Attrs, golden.SamplingAdjustedCount, "a field, not an attribute")
}

func TestDimensionNamesAreBounded(t *testing.T) {
	tr := newDimensionTracker()
	for i := range maxDimensionNames + 10 {
		tr.isDimension(fmt.Sprintf("name.%d", i), "v")
	}
	assert.Len(t, tr.names, maxDimensionNames)
	assert.False(t, tr.isDimension("one.more", "v"), "a name beyond the bound is not watched")
	assert.True(t, tr.isDimension("name.0", "v"))
}
