package failure

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

func TestExplicit(t *testing.T) {
	e := NewExplicit(ExplicitConfig{})
	for name, tc := range map[string]struct {
		rec  *Record
		want Kind
	}{
		"span status error": {span(func(s ptrace.Span) { s.Status().SetCode(ptrace.StatusCodeError) }), KindStatus},
		"span status ok":    {span(func(s ptrace.Span) { s.Status().SetCode(ptrace.StatusCodeOk) }), 0},
		"exception event": {span(func(s ptrace.Span) {
			s.Events().AppendEmpty().SetName("exception")
		}), KindException},
		"log ERROR":        {logRecord(func(l plog.LogRecord) { l.SetSeverityNumber(plog.SeverityNumberError) }), KindSeverity},
		"log WARN":         {logRecord(func(l plog.LogRecord) { l.SetSeverityNumber(plog.SeverityNumberWarn4) }), 0},
		"text only CRIT":   {logRecord(func(l plog.LogRecord) { l.SetSeverityText("CRITICAL") }), KindSeverity},
		"text only INFO":   {logRecord(func(l plog.LogRecord) { l.SetSeverityText("INFO") }), 0},
		"body only ERROR":  {logRecord(func(l plog.LogRecord) { l.Body().SetStr("ERROR write failed") }), KindText},
		"body JSON error":  {logRecord(func(l plog.LogRecord) { l.Body().SetStr(`{"level":"error","event":"x"}`) }), KindText},
		"body INFO":        {logRecord(func(l plog.LogRecord) { l.Body().SetStr("INFO fine") }), 0},
		"number over body": {logRecord(func(l plog.LogRecord) { l.SetSeverityNumber(9); l.Body().SetStr("ERROR x") }), 0},
		"no severity":      {logRecord(func(plog.LogRecord) {}), 0},
		"error.type set":   {span(func(s ptrace.Span) { s.Attributes().PutStr("error.type", "timeout") }), KindAttribute},
		"error.type empty": {span(func(s ptrace.Span) { s.Attributes().PutStr("error.type", "") }), 0},
		"error_code 503":   {logRecord(func(l plog.LogRecord) { l.Attributes().PutInt("error_code", 503) }), KindAttribute},
		"error_code 0":     {logRecord(func(l plog.LogRecord) { l.Attributes().PutInt("error_code", 0) }), 0},
		"error_code \"0\"": {logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("error_code", "0") }), 0},
		"error none":       {logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("error", "none") }), 0},
		"schema drift mark": {logRecord(func(l plog.LogRecord) {
			l.Attributes().PutEmptySlice(golden.DriftFieldsLost).AppendEmpty().SetStr("digest")
		}), KindSchemaDrift},
		"empty drift mark": {logRecord(func(l plog.LogRecord) { l.Attributes().PutEmptySlice(golden.DriftFieldsLost) }), 0},
		"gpu failure": {logRecord(func(l plog.LogRecord) {
			l.SetSeverityNumber(plog.SeverityNumberError)
			l.SetEventName("gpu.ioctl.failed")
		}), KindGPU},
	} {
		if name == "gpu failure" {
			tc.rec.ScopeLogs.Scope().SetName(golden.GPUEventScope)
		}
		r, ok := e.Check(tc.rec)
		assert.Equal(t, tc.want != 0, ok, name)
		assert.Equal(t, tc.want, r.Kind, name)
	}
}

func TestSchemaDriftReason(t *testing.T) {
	r, ok := NewExplicit(ExplicitConfig{}).Check(logRecord(func(l plog.LogRecord) {
		lost := l.Attributes().PutEmptySlice(golden.DriftFieldsLost)
		lost.AppendEmpty().SetStr("segment_map")
		lost.AppendEmpty().SetStr("digest")
		l.Attributes().PutStr(golden.DriftOldModelVer, "phi3-v3.1")
	}))
	assert.True(t, ok)
	assert.Equal(t, KindSchemaDrift, r.Kind)
	assert.Equal(t, "schema_drift: segment_map,digest: missing since model_ver phi3-v3.1", r.String())
}

func TestExplicitConfiguredAttributes(t *testing.T) {
	e := NewExplicit(ExplicitConfig{MinSeverity: plog.SeverityNumberWarn, Attributes: []string{"outcome.error"}})
	r, ok := e.Check(logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("outcome.error", "quota") }))
	assert.True(t, ok)
	assert.Equal(t, Reason{Kind: KindAttribute, Attribute: "outcome.error", Value: "quota"}, r)
	_, ok = e.Check(logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("error.type", "x") }))
	assert.False(t, ok, "only the configured attributes")
	_, ok = e.Check(logRecord(func(l plog.LogRecord) { l.Body().SetStr("WARNING low disk") }))
	assert.True(t, ok, "min severity warn")
}

func TestVerdictTravelsOnRecords(t *testing.T) {
	var v Verdict
	v.Add(Reason{Kind: KindValueDrift, Detector: "value_drift", Service: "judge", Stage: "guard", Attribute: "grade",
		Value: "poor", Baseline: 0.001, Current: 0.3})
	v.Add(Reason{Kind: KindValueDrift, Detector: "value_drift", Service: "judge", Stage: "guard", Attribute: "grade", Value: "poor"})
	v.Add(Reason{Kind: KindText, Detector: "errors", Service: "store"})
	for range MaxReasons {
		v.Add(Reason{Kind: KindStatus, Value: "x" + string(rune('a'+len(v.Reasons)))})
	}
	assert.Len(t, v.Reasons, MaxReasons, "bounded, repeats once")
	attrs := logRecord(func(plog.LogRecord) {}).Attrs
	attrs.PutStr(VerdictAttr, "forged")
	v.Annotate(attrs)
	got, ok := FromAttributes(attrs)
	assert.True(t, ok)
	assert.Equal(t, v, got)
	texts := ReasonTexts(attrs)
	require.Len(t, texts, MaxReasons)
	assert.Equal(t, v.Reasons[0].String(), texts[0], "the text written beside each reason")
	assert.Equal(t, "value_drift: grade=poor at guard (judge): 0.1% of the baseline, 30.0% now", got.Reasons[0].String())

	var healthy Verdict
	healthy.Annotate(attrs)
	got, ok = FromAttributes(attrs)
	assert.True(t, ok)
	assert.Equal(t, Verdict{}, got)
	_, present := attrs.Get(ReasonsAttr)
	assert.False(t, present)
}

func TestNamesPlace(t *testing.T) {
	attrs := logRecord(func(plog.LogRecord) {}).Attrs
	assert.False(t, NamesPlace(attrs, "renderer", "render/finish"), "no verdict")
	var v Verdict
	v.Add(Reason{Kind: KindLatency, Service: "renderer", Stage: "render/finish"})
	v.Annotate(attrs)
	assert.True(t, NamesPlace(attrs, "renderer", "render/finish"))
	assert.False(t, NamesPlace(attrs, "renderer", "render/start"))
	var healthy Verdict
	healthy.Annotate(attrs)
	assert.False(t, NamesPlace(attrs, "renderer", "render/finish"), "a healthy request")
}

// The verdict's attributes are Loom's own: no detector reads them as the service's.
func TestVerdictAttributesAreLoomsOwn(t *testing.T) {
	assert.True(t, golden.IsLoomAttr(VerdictAttr))
	assert.True(t, golden.IsLoomAttr(ReasonsAttr))
}

func TestReasonAttributesAreTheSymptoms(t *testing.T) {
	attrs := logRecord(func(plog.LogRecord) {}).Attrs
	assert.Nil(t, ReasonAttributes(attrs), "no verdict, no symptom")
	var v Verdict
	v.Add(Reason{Kind: KindLatency, Service: "model", Stage: "forward", Attribute: "duration_ms"})
	v.Add(Reason{Kind: KindValueDrift, Attribute: "verdict.grade", Value: "poor"})
	v.Add(Reason{Kind: KindSchemaDrift, Attribute: "digest,segment_map", Value: "phi3-v3.1"})
	v.Add(Reason{Kind: KindAttribute, Attribute: "error.type", Value: "timeout"})
	v.Add(Reason{Kind: KindValueDrift, Attribute: "verdict.grade", Value: Absent})
	v.Annotate(attrs)
	assert.Equal(t, []string{"digest", "error.type", "segment_map", "verdict.grade"}, ReasonAttributes(attrs),
		"each attribute once; a latency reason's duration is no attribute of the record")
}

func TestReasonGroupDropsTheQuantities(t *testing.T) {
	slow := Reason{Kind: KindLatency, Service: "model", Stage: "forward", Attribute: "duration_ms", Baseline: 900, Current: 4200}
	slower := slow
	slower.Current = 5100
	assert.Equal(t, ReasonGroup(slow.String()), ReasonGroup(slower.String()))
	assert.Equal(t, "latency: duration_ms at forward (model)", ReasonGroup(slow.String()))
	drift := Reason{Kind: KindSchemaDrift, Attribute: "digest", Value: "phi3-v3.1", Stage: "decode"}
	assert.Equal(t, drift.String(), ReasonGroup(drift.String()), "the model version is not a quantity")
}
