package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestErrors(t *testing.T) {
	p := NewErrors(plog.SeverityNumberError, []string{"error.type", "error_code"})
	for name, tc := range map[string]struct {
		rec  *Record
		want bool
	}{
		"span status error": {span(func(s ptrace.Span) { s.Status().SetCode(ptrace.StatusCodeError) }), true},
		"span status ok":    {span(func(s ptrace.Span) { s.Status().SetCode(ptrace.StatusCodeOk) }), false},
		"log ERROR":         {logRecord(func(l plog.LogRecord) { l.SetSeverityNumber(plog.SeverityNumberError) }), true},
		"log FATAL":         {logRecord(func(l plog.LogRecord) { l.SetSeverityNumber(plog.SeverityNumberFatal2) }), true},
		"log WARN":          {logRecord(func(l plog.LogRecord) { l.SetSeverityNumber(plog.SeverityNumberWarn4) }), false},
		"text only ERROR":   {logRecord(func(l plog.LogRecord) { l.SetSeverityText("error") }), true},
		"text only CRIT":    {logRecord(func(l plog.LogRecord) { l.SetSeverityText("CRITICAL") }), true},
		"text only INFO":    {logRecord(func(l plog.LogRecord) { l.SetSeverityText("INFO") }), false},
		"no severity":       {logRecord(func(plog.LogRecord) {}), false},
		"error.type set":    {span(func(s ptrace.Span) { s.Attributes().PutStr("error.type", "timeout") }), true},
		"error.type empty":  {span(func(s ptrace.Span) { s.Attributes().PutStr("error.type", "") }), false},
		"error_code 503":    {logRecord(func(l plog.LogRecord) { l.Attributes().PutInt("error_code", 503) }), true},
		"error_code 0":      {logRecord(func(l plog.LogRecord) { l.Attributes().PutInt("error_code", 0) }), false},
		"error_code list":   {logRecord(func(l plog.LogRecord) { l.Attributes().PutEmptySlice("error_code").AppendEmpty().SetStr("x") }), true},
		"unlisted attr":     {logRecord(func(l plog.LogRecord) { l.Attributes().PutStr("error_type", "x") }), false},
	} {
		assert.Equal(t, tc.want, p.MatchRecord(tc.rec), name)
		assert.Equal(t, tc.want, p.MatchRequest(&Request{}, p.MatchRecord(tc.rec)), name)
	}
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
	assert.False(t, ok)
}
