package failure

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestConventions holds one case per rule of the semantic conventions'
// table, on each side of a call, with the status left unset as
// instrumentations often leave it.
func TestConventions(t *testing.T) {
	e := NewExplicit(ExplicitConfig{})
	put := func(k string, v any) func(pcommon.Map) {
		return func(m pcommon.Map) { _ = m.PutEmpty(k).FromRaw(v) }
	}
	for _, tc := range []struct {
		name  string
		kind  ptrace.SpanKind // 0: a log record
		attr  func(pcommon.Map)
		fails bool
	}{
		{"http server 503", ptrace.SpanKindServer, put("http.response.status_code", 503), true},
		{"http server 404", ptrace.SpanKindServer, put("http.response.status_code", 404), false},
		{"http server 200", ptrace.SpanKindServer, put("http.response.status_code", 200), false},
		{"http client 404", ptrace.SpanKindClient, put("http.response.status_code", 404), true},
		{"http client 500 as text", ptrace.SpanKindClient, put("http.response.status_code", "500"), true},
		{"http client 302", ptrace.SpanKindClient, put("http.response.status_code", 302), false},
		{"http internal 429", ptrace.SpanKindInternal, put("http.response.status_code", 429), false},
		{"http old name server 502", ptrace.SpanKindServer, put("http.status_code", 502), true},
		{"http access log 500", 0, put("http.response.status_code", 500), true},
		{"http access log 404", 0, put("http.response.status_code", 404), false},
		{"grpc client UNAVAILABLE", ptrace.SpanKindClient, put("rpc.grpc.status_code", 14), true},
		{"grpc client NOT_FOUND", ptrace.SpanKindClient, put("rpc.grpc.status_code", 5), true},
		{"grpc client OK", ptrace.SpanKindClient, put("rpc.grpc.status_code", 0), false},
		{"grpc server NOT_FOUND", ptrace.SpanKindServer, put("rpc.grpc.status_code", 5), false},
		{"grpc server INTERNAL", ptrace.SpanKindServer, put("rpc.grpc.status_code", 13), true},
		{"grpc server DEADLINE_EXCEEDED", ptrace.SpanKindServer, put("rpc.grpc.status_code", 4), true},
		{"grpc code out of range", ptrace.SpanKindClient, put("rpc.grpc.status_code", 99), false},
		{"rpc status by name", ptrace.SpanKindServer, put("rpc.response.status_code", "UNAVAILABLE"), true},
		{"rpc status by name, caller's fault", ptrace.SpanKindServer, put("rpc.response.status_code", "INVALID_ARGUMENT"), false},
		{"connect client error", ptrace.SpanKindClient, put("rpc.connect_rpc.error_code", "permission_denied"), true},
		{"connect server caller error", ptrace.SpanKindServer, put("rpc.connect_rpc.error_code", "permission_denied"), false},
		{"db SQLSTATE unique violation", ptrace.SpanKindClient, put("db.response.status_code", "23505"), true},
		{"db SQLSTATE success", ptrace.SpanKindClient, put("db.response.status_code", "00000"), false},
		{"db SQLSTATE warning", ptrace.SpanKindClient, put("db.response.status_code", "01000"), false},
		{"db SQLSTATE no data", ptrace.SpanKindClient, put("db.response.status_code", "02000"), false},
		{"db SQLSTATE letters", ptrace.SpanKindClient, put("db.response.status_code", "08P01"), true},
		{"db error number", ptrace.SpanKindClient, put("db.response.status_code", 11000), true},
		{"db error word", ptrace.SpanKindClient, put("db.response.status_code", "WRONGTYPE"), true},
		{"db over http 503", ptrace.SpanKindClient, put("db.response.status_code", "503"), true},
		{"db over http 200", ptrace.SpanKindClient, put("db.response.status_code", 200), false},
		{"otel.status_code ERROR", ptrace.SpanKindServer, put("otel.status_code", "ERROR"), true},
		{"otel.status_code OK", ptrace.SpanKindServer, put("otel.status_code", "OK"), false},
		{"finish reason error", ptrace.SpanKindClient, put("gen_ai.response.finish_reasons", []any{"stop", "error"}), true},
		{"finish reason stop", ptrace.SpanKindClient, put("gen_ai.response.finish_reasons", []any{"stop", "length"}), false},
		{"finish reason as one string", 0, put("gen_ai.response.finish_reasons", "error"), true},
		{"error.type", ptrace.SpanKindServer, put("error.type", "timeout"), true},
	} {
		var rec *Record
		if tc.kind == 0 {
			rec = logRecord(func(l plog.LogRecord) { tc.attr(l.Attributes()) })
		} else {
			rec = span(func(s ptrace.Span) { s.SetKind(tc.kind); tc.attr(s.Attributes()) })
		}
		r, ok := e.Check(rec)
		assert.Equal(t, tc.fails, ok, tc.name)
		if ok {
			assert.Equal(t, KindAttribute, r.Kind, tc.name)
			assert.NotEmpty(t, r.Attribute, tc.name)
		}
		_, ok = NewExplicit(ExplicitConfig{IgnoreConventions: true}).Check(rec)
		assert.Equal(t, tc.fails && tc.name == "error.type", ok, "%s, conventions off", tc.name)
	}
}

func TestConventionExceptionEvents(t *testing.T) {
	e := NewExplicit(ExplicitConfig{})
	r, ok := e.Check(span(func(s ptrace.Span) {
		s.Events().AppendEmpty().SetName("gen_ai.client.operation.exception")
	}))
	assert.True(t, ok)
	assert.Equal(t, KindException, r.Kind)

	r, ok = e.Check(logRecord(func(l plog.LogRecord) {
		l.SetEventName("exception")
		l.SetSeverityNumber(plog.SeverityNumberInfo)
		l.Attributes().PutStr("exception.message", "boom")
	}))
	assert.True(t, ok, "an exception event logged at INFO is still one")
	assert.Equal(t, KindException, r.Kind)

	_, ok = e.Check(logRecord(func(l plog.LogRecord) { l.SetEventName("gen_ai.choice") }))
	assert.False(t, ok)
}

func TestConventionFinishReasonsConfigured(t *testing.T) {
	e := NewExplicit(ExplicitConfig{FailureFinishReasons: []string{"error", "content_filter"}})
	r, ok := e.Check(span(func(s ptrace.Span) {
		s.Attributes().PutEmptySlice("gen_ai.response.finish_reasons").AppendEmpty().SetStr("content_filter")
	}))
	assert.True(t, ok)
	assert.Equal(t, "error_attribute: gen_ai.response.finish_reasons=content_filter", r.String())
}

func TestConventionReasonNamesTheCode(t *testing.T) {
	r, ok := NewExplicit(ExplicitConfig{}).Check(span(func(s ptrace.Span) {
		s.SetKind(ptrace.SpanKindClient)
		s.Attributes().PutInt("rpc.grpc.status_code", 14)
	}))
	assert.True(t, ok)
	assert.Equal(t, "error_attribute: rpc.grpc.status_code=14", r.String())
}
