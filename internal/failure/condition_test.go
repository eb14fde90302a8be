package failure

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestConditions(t *testing.T) {
	var evalErrors int
	p, err := NewConditions([]string{
		`Int(attributes["output_length"]) == 0`,
		`attributes["filter_reason"] != nil and attributes["filter_reason"] != "none"`,
		`name == "model/forward" and attributes["resource_usage.latency_ms"] > 3000`, // spans only
	}, componenttest.NewNopTelemetrySettings(), func(error) { evalErrors++ })
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		rec  *Record
		want bool
	}{
		// After goldenfield, logfmt values are strings and span attributes numbers.
		"log output_length \"0\"": {logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("output_length", "0") }), true},
		"span output_length 0":    {span(func(s ptrace.Span) { s.Attributes().PutInt("output_length", 0) }), true},
		"span output_length 12":   {span(func(s ptrace.Span) { s.Attributes().PutInt("output_length", 12) }), false},
		"no output_length":        {logRecord(func(plog.LogRecord) {}), false},
		"filter_reason none":      {logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("filter_reason", "none") }), false},
		"filter_reason dedup": {logRecord(func(l plog.LogRecord) {
			l.Attributes().PutStr("filter_reason", "empty_after_dedup")
		}), true},
		"slow forward span": {span(func(s ptrace.Span) {
			s.SetName("model/forward")
			s.Attributes().PutDouble("resource_usage.latency_ms", 4200)
		}), true},
	} {
		_, held := p.Check(tc.rec)
		assert.Equal(t, tc.want, held, name)
	}
	assert.Zero(t, evalErrors)
}

func TestConditionsEvalErrorsAreReported(t *testing.T) {
	var evalErrors int
	p, err := NewConditions([]string{`Int(attributes["n"]) > 1`}, componenttest.NewNopTelemetrySettings(),
		func(error) { evalErrors++ })
	require.NoError(t, err)
	rec := logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("n", "not a number") })
	_, held := p.Check(rec)
	assert.False(t, held)
	assert.Equal(t, 1, evalErrors, "nil > 1 cannot be evaluated: reported, no match")
}

func TestConditionsParseErrors(t *testing.T) {
	for _, conditions := range [][]string{nil, {""}, {`attributes["x" ==`}, {`nonsense(1)`}} {
		_, err := NewConditions(conditions, componenttest.NewNopTelemetrySettings(), func(error) {})
		assert.Error(t, err, "%q", conditions)
	}
}
