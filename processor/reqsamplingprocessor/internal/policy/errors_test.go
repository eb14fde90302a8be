package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/failure"
)

func TestErrorsSaysWhy(t *testing.T) {
	p := NewErrors("errors", failure.ExplicitConfig{Attributes: []string{"error.type"}})
	var f Findings
	rec := span(func(s ptrace.Span) { s.Attributes().PutStr("error.type", "timeout") })
	rec.Service, rec.Stage = "edge", "edge/request"
	assert.True(t, p.DetectRecord(rec, &f))
	require.Len(t, f.Verdict.Reasons, 1)
	assert.Equal(t, failure.Reason{Kind: failure.KindAttribute, Detector: "errors", Service: "edge", Stage: "edge/request",
		Attribute: "error.type", Value: "timeout"}, f.Verdict.Reasons[0])
	assert.True(t, p.MatchRecord(rec))
	assert.True(t, p.MatchRequest(&Request{}, true))

	ok := logRecord(func(l plog.LogRecord) { l.Body().SetStr("INFO all good") })
	assert.False(t, p.DetectRecord(ok, &f))
	assert.Len(t, f.Verdict.Reasons, 1)
}

func TestParseSeverity(t *testing.T) {
	for name, want := range map[string]plog.SeverityNumber{
		"trace": plog.SeverityNumberTrace, "DEBUG": plog.SeverityNumberDebug, "Info": plog.SeverityNumberInfo,
		"warn": plog.SeverityNumberWarn, "error": plog.SeverityNumberError, "fatal": plog.SeverityNumberFatal,
	} {
		got, ok := ParseSeverity(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	_, ok := ParseSeverity("warning")
	assert.False(t, ok, "the config takes the six names only")
}
